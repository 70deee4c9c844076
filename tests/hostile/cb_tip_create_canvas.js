// expect: canvas
// class 1: a custom tip that swaps in a 2D canvas through an aliased createCanvas
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
  const make = this["create" + "Canvas"];
  brush.add("swap", { type: "custom", weight: 5, opacity: 100, spacing: 1, tip: (_m) => { _m.rect(-5, -5, 10, 10); make(512, 512); } });
  brush.set("swap", "#000", 1);
  brush.line(50, 400, 450, 400);
}
