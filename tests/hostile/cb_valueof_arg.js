// expect: hidden_code|bare_primitives|raw_drawing
// class 1: an argument whose valueOf paints when p5.brush reads it
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
  const g = this;
  const radius = { valueOf() { g["ell" + "ipse"](256, 256, 300, 300); return 80; } };
  brush.circle(256, 256, radius);
}
