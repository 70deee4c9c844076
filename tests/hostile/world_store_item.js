// expect: dom
// p5's storage, reached by a computed name: what the previous sketch left
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
  const old = this["get" + "Item"]("palette");
  this["store" + "Item"]("palette", "#c2366a");
}
