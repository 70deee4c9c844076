// a countdown written `i-->0`, which an HTML-comment filter would misread, and async setup with a layer
async function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  let i = 4;
  while (i-->0) {
    brush.fill(["#c2366a", "#e8743b", "#3c8d5a", "#2b6cb0"][i], 160);
    brush.circle(120 + i * 90, 256, 50);
  }
}
