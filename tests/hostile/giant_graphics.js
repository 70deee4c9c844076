// expect: canvas
// class 8: one giant graphics buffer
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
  const pg = createGraphics(8192, 8192, WEBGL);
  brush.load(pg);
  brush.circle(10, 10, 5);
  brush.load();
}
