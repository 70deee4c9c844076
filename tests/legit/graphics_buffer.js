// p5.brush's README workflow: a WEBGL createGraphics buffer, brush.load(pg), then image()
let pg;
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  pg = createGraphics(400, 400, WEBGL);
  pg.background("#fbf7ee");
  brush.load(pg);
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fill("#2b6cb0", 180);
  brush.circle(0, 0, 140);
  brush.load();
  image(pg, 56, 56);
}
