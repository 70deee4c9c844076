// expect: bare_primitives
// a second realm of its own, from which bare shapes are drawn
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
