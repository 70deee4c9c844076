// expect: bare_primitives
// a layer of the canvas's own paper printed with blendMode(DIFFERENCE): a black block
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
  const g = createGraphics(200, 200, WEBGL);
  g.background("#fbf7ee");
  brush.load(g);
  brush.fill("#ffffff", 30);
  brush.circle(0, 0, 2);
  brush.load();
  blendMode(DIFFERENCE);
  image(g, 20, 20);
  blendMode(BLEND);
}
