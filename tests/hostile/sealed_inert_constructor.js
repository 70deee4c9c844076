// expect: eval
// the page's evaluator reached through a function's prototype, to paint with the page's own p5
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
  const F = Reflect.getPrototypeOf(function () {})["const" + "ructor"];
  F("return p5.instance")().ellipse(100, 100, 80, 80);
}
