// expect: canvas
// a 20000 x 20000 canvas
function setup() {
  createCanvas(20000, 20000, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fill("#c2366a", 160);
  brush.circle(256, 256, 80);
}
