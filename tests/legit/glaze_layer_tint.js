// a glaze: a layer painted with p5.brush, composited at a lower opacity through tint() and a blend mode
function setup() {
  createCanvas(600, 600, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(3);
  brush.noStroke();
  brush.fill("#e08a72", 180);
  brush.circle(300, 300, 160);
  const glaze = createGraphics(600, 600, WEBGL);
  brush.load(glaze);
  brush.noStroke();
  brush.fill("#2b6cb0", 200);
  brush.beginShape(0.4);
  brush.vertex(-200, -150); brush.vertex(150, -200); brush.vertex(220, 120); brush.vertex(-120, 200);
  brush.endShape(true);
  brush.load();
  push();
  blendMode(MULTIPLY);
  tint(255, 140);
  image(glaze, 0, 0);
  noTint();
  pop();
}
