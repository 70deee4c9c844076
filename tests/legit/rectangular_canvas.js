// a landscape canvas within the allowed range, painted relative to its size
const W = 640, H = 400;
function setup() {
  createCanvas(W, H, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#f4efe4");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fill("#2f6690", 170);
  brush.rect(0, height * 0.55, width, height * 0.45);
  brush.fill("#f6ae2d", 200);
  brush.circle(width * 0.7, height * 0.3, 50);
}
