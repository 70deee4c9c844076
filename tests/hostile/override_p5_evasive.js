// expect: bare_primitives|runtime_error
// swapping p5's ellipse for its own before p5 starts
const P = this["p" + "5"];
const orig = P["proto" + "type"]["ell" + "ipse"];
P["proto" + "type"]["ell" + "ipse"] = function (...a) { return orig.apply(this, a); };
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
  this["ell" + "ipse"](100, 100, 80, 80);
}
