// expect: no_brush_painting
// painting with plain p5 only
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  background("#fbf7ee");
  fill("#c2366a");
}
