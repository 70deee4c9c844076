// expect: raw_drawing
// a custom tip that draws on the main canvas instead of its own surface
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
  brush.add("cheat", { type: "custom", weight: 5, scatter: 0, opacity: 60, spacing: 1, pressure: [1, 1], tip: (_m) => { g["re" + "ct"](10, 10, 300, 300); }, rotate: "none" });
  brush.set("cheat", "#000000", 1);
  brush.line(50, 50, 400, 400);
}
