function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed(9046);
  brush.scaleBrushes(2);
  const petals = 6;
  const cx = 304, cy = 226;
  // leaves first, so the petals wash over them
  brush.noStroke();
  brush.fill("#8fb06f", 110); brush.fillBleed(0.35, "out"); brush.fillTexture(0.7, 0.6);
  brush.beginShape(0.6);
  brush.vertex(cx - 20, cy + 60); brush.vertex(cx - 120, cy + 150); brush.vertex(cx - 30, cy + 130);
  brush.endShape(true);
  // two layers of translucent petals that bleed into each other
  for (let layer = 0; layer < 2; layer++) {
    for (let i = 0; i < petals; i++) {
      const a = i * 360 / petals + layer * 180 / petals + random(-10, 10);
      const r = (layer == 0 ? 77 : 77 * 0.55);
      brush.fill(random(["#e07a8f", "#f2a65a", "#c94f6d", "#f6c5af"]), random(110, 150));
      brush.fillBleed(random(0.3, 0.5), "out");
      brush.fillTexture(0.6, 0.5);
      brush.circle(cx + cos(a) * r, cy + sin(a) * r, random(0.6, 0.8) * r);
    }
  }
  brush.fill("#c94f6d", 140); brush.fillBleed(0.3, "out");
  brush.circle(cx, cy, 14);
  brush.noFill();
  brush.set("2B", "#8fb06f", 1);
  brush.line(cx + 6, cy + 40, cx + 30, 500);
}
