// expect: raw_drawing
// a custom tip's surface kept after its callback and drawn on later
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
  let kept = null;
  brush.add("keep", { type: "custom", weight: 5, scatter: 0, opacity: 60, spacing: 1, pressure: [1, 1], rotate: "none", tip: (m) => { kept = m; m.circle(0, 0, 10); } });
  kept.rect(0, 0, 300, 300);
}
