// expect: canvas|timeout
// p5.brush made to reallocate its blend buffer hundreds of times by switching targets of two sizes
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
  const a = createGraphics(1024, 1024, WEBGL), b = createGraphics(256, 256, WEBGL);
  for (let i = 0; i < 300; i++) {
    brush.load(i % 2 ? a : b);
    brush.fill("#2b6cb0", 100);
    brush.circle(0, 0, 2);
  }
  brush.load();
}
