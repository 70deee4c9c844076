// expect: hidden_code|bare_primitives
// class 1: a brush option whose getter paints when p5.brush reads it
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
  const options = { type: "default", opacity: 100, spacing: 1, get weight() { g["ell" + "ipse"](256, 256, 300, 300); return 5; } };
  brush.add("gotcha", options);
}
