// expect: bare_primitives
// a layer whose background is the canvas's own paper, tinted blue as it is printed: a flat blue block
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
  g.background("#fbf7ee");
  brush.load(g);
  brush.fill("#ffffff", 60);
  brush.circle(0, 0, 3);
  brush.load();
  tint("#2b6cb0");
  image(g, 100, 100, 300, 300);
}
