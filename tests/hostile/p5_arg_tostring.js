// expect: hidden_code|bare_primitives|raw_drawing
// class 1: a colour whose toString paints when p5 reads it
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  const g = this;
  background({ toString() { g["ell" + "ipse"](100, 100, 80, 80); return "#fbf7ee"; } });
  brush.noStroke();
  brush.fill("#c2366a", 160);
  brush.circle(256, 256, 80);
}
