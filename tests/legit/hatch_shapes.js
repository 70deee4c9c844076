// hatching with hatchStyle over filled shapes
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fill("#f2c14e", 160);
  brush.hatch(8, 45);
  brush.hatchStyle("HB", "#1a202c", 0.8);
  brush.rect(90, 90, 330, 330);
  brush.noHatch();
  brush.fill("#5c80bc", 170);
  brush.circle(256, 256, 90);
}
