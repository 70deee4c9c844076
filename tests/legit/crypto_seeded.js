// class 6: colours and positions from crypto.getRandomValues and randomUUID, seeded by the page
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  const id = crypto.randomUUID();
  const palette = ["#c2366a", "#e8743b", "#3c8d5a", "#2b6cb0"];
  for (let i = 0; i < 4; i++) {
    brush.fill(palette[(bytes[i] + id.charCodeAt(i)) % 4], 170);
    brush.circle(100 + bytes[i + 4], 100 + i * 100, 60);
  }
}
