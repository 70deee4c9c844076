// expect: raw_drawing
// a kept brush.Polygon painting from inside a brush callback (its brush.* twin is refused there)
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
  const poly = new brush.Polygon([[20, 20], [500, 30], [480, 500], [30, 480]]);
  brush.add("sneak", { type: "custom", weight: 5, scatter: 0, opacity: 60, spacing: 1, pressure: [1, 1], rotate: "none", tip: (m) => { poly.fill(); m.circle(0, 0, 10); } });
}
