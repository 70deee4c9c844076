// expect: raw_drawing
// class 1: a custom tip that paints a shape on the main canvas
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
  brush.add("sneaky", { type: "custom", weight: 5, opacity: 100, spacing: 1, tip: (_m) => { _m.rect(-10, -10, 20, 20); g["ell" + "ipse"](100, 100, 150, 150); } });
  brush.set("sneaky", "#000", 1);
  brush.line(50, 400, 450, 400);
}
