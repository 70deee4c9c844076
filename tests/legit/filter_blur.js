// p5's own built-in filter over the painting (p5 builds its WEBGL filter shaders itself)
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fill("#2b6cb0", 170);
  brush.circle(256, 256, 120);
  filter(BLUR, 1);
}
