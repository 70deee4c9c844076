function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed(2086);
  brush.scaleBrushes(2);
  const petals = 5;
  const cx = 300, cy = 225;
  for (let i = 0; i < petals; i++) {
    const a = i * 360 / petals;
    const x = cx + cos(a) * 98, y = cy + sin(a) * 98;
    brush.noStroke();
    brush.fill(random(["#e07a8f", "#f2a65a", "#c94f6d", "#f6c5af"]), random(120, 160));
    brush.fillBleed(random(0.05, 0.12), "out");
    brush.fillTexture(0.3, 0.3);
    brush.circle(x, y, 98 * 0.5);
    brush.noFill();
    brush.set("pen", "#3a2e2a", 1.2);
    brush.circle(x, y, 98 * 0.5);
  }
  brush.noStroke();
  brush.fill("#f2a65a", 170); brush.fillBleed(0.05, "out");
  brush.circle(cx, cy, 20);
  brush.noFill();
  brush.set("HB", "#8fb06f", 1.5);
  brush.line(cx, cy + 30, cx, 500);
}
