// expect: raw_drawing
// a layer handed to background() to be printed as the canvas's paper
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
  brush.load(g);
  brush.fill("#2b6cb0", 200);
  brush.circle(0, 0, 100);
  brush.load();
  background(g);
}
