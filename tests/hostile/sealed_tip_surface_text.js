// expect: text
// a custom tip that writes text on its own surface
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
  brush.add("words", { type: "custom", weight: 20, scatter: 0, opacity: 90, spacing: 1, pressure: [1, 1], tip: (_m) => { _m.text("A", 0, 0); }, rotate: "none" });
  brush.set("words", "#000000", 1);
  brush.line(50, 50, 400, 400);
}
