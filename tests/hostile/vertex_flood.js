// expect: timeout|runtime_error
// ten million vertices in one shape
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fill("#c2366a", 160);
  brush.circle(256, 256, 80);
  brush.beginShape(0);
  for (let i = 0; i < 1e7; i++) brush.vertex(256 + cos(i) * 200, 256 + sin(i) * 200);
  brush.endShape(true);
}
