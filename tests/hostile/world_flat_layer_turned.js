// expect: bare_primitives
// a flat-paper layer printed turned 45 degrees and large enough that its box covers the canvas: a flat diamond
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
  const g = createGraphics(512, 512, WEBGL);
  g.background("#2b6cb0");
  brush.load(g);
  brush.fill("#ffffff", 60);
  brush.circle(0, 0, 3);
  brush.load();
  push();
  translate(256, 256);
  rotate(PI / 4);
  imageMode(CENTER);
  image(g, 0, 0, 560, 560);
  pop();
}
