// p5's built-in filters on a painted canvas: a blur, then an erode and a dilate to soften the edges
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fill("#3c8d5a", 180);
  brush.rect(100, 120, 220, 240);
  brush.fill("#c2366a", 160);
  brush.circle(330, 300, 90);
  filter(BLUR, 2);
  filter(ERODE);
  filter(DILATE);
}
