// expect: eval
// a second realm of its own, from the hardening library's Compartment, from which bare shapes would be drawn
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
  const c = new Compartment({ __options__: true, globals: { draw: g["ell" + "ipse"] } });
  c.evaluate("draw(100, 100, 80, 80)");
}
