// expect: bare_primitives
// erase() with a paper-coloured layer: a crisp rectangular hole through the painting
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
  erase();
  image(g, 150, 150);
  noErase();
}
