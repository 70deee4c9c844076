// a built-in vector field steering flowLine strokes
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.field("waves");
  brush.set("marker", "#3f6e9e", 2);
  for (let y = 60; y < 480; y += 40) brush.flowLine(40, y, 420, 0);
  brush.noField();
  brush.noStroke();
  brush.fill("#b83b5e", 150);
  brush.circle(256, 256, 60);
}
