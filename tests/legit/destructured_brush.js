// brush methods through destructuring are still brush
const { circle, rect, fill, noStroke, scaleBrushes } = brush;
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  scaleBrushes(2);
  noStroke();
  fill("#c2366a", 170);
  circle(200, 220, 90);
  fill("#2b6cb0", 150);
  rect(250, 250, 170, 140);
}
