// class 6: positions from Date.now() and new Date(): the page's clock is virtual, so the picture is reproducible
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  const t = Date.now() + new Date().getMilliseconds();
  brush.fill("#c2366a", 170);
  brush.circle(150 + (t % 211), 256, 100);
}
