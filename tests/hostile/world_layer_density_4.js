// expect: canvas
// a 1024 px layer asking for density 4: a 4096 px buffer (issue 48's leftover)
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
  const g = createGraphics(1024, 1024, WEBGL);
  g.pixelDensity(4);
  brush.load(g);
  brush.fill("#2b6cb0", 160);
  brush.circle(0, 0, 300);
  brush.load();
  image(g, 0, 0, 512, 512);
}
