// expect: bare_primitives
// flat blocks again, from a layer p5.brush painted one mark on: a layer is printed once a frame
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
  const g = createGraphics(128, 128, WEBGL);
  g.background("#2b6cb0");
  brush.load(g);
  brush.fill("#ffffff", 100);
  brush.circle(0, 0, 4);
  brush.load();
  for (let i = 0; i < 12; i++) image(g, (i % 4) * 128, floor(i / 4) * 128);
}
