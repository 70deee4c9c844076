// expect: bare_primitives|no_brush_painting
// class 1: draw() replaced from setup, so that p5 calls a function the page never saw declared
function setup() {
  createCanvas(512, 512, WEBGL);
  const shape = this["ell" + "ipse"];
  this["dr" + "aw"] = function () {
    translate(-width / 2, -height / 2);
    background("#fbf7ee");
    brush.noStroke();
    brush.fill("#c2366a", 160);
    brush.circle(256, 256, 80);
    shape(100, 100, 80, 80);
  };
  noLoop();
}
function draw() {}
