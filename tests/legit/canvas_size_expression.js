// the canvas size as an expression
function setup() {
  createCanvas(min(512, windowWidth), 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fill("#6a4c93", 170);
  brush.circle(width / 2, height / 2, width / 5);
}
