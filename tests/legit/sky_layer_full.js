// a sky layer: its own pale paper and p5.brush clouds, printed over the whole canvas (a new paper, as background() is)
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  const sky = createGraphics(512, 512, WEBGL);
  sky.background("#e4eef5");
  brush.load(sky);
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fill("#9bb7d4", 150);
  brush.circle(-100, -120, 90);
  brush.circle(60, -140, 70);
  brush.load();
  image(sky, 0, 0, width, height);
  brush.noStroke();
  brush.fill("#3c8d5a", 180);
  brush.rect(0, 380, 512, 132);
}
