function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed(2596);
  brush.scaleBrushes(2);
  const petals = 6;
  const cx = 277, cy = 212;
  for (let i = 0; i < petals; i++) {
    const a = i * 360 / petals;
    const x = cx + cos(a) * 72, y = cy + sin(a) * 72;
    brush.noStroke();
    brush.fill(random(["#e0c341", "#f2a541", "#d1793c", "#f7e08a"]), random(120, 160));
    brush.fillBleed(random(0.05, 0.12), "out");
    brush.fillTexture(0.3, 0.3);
    brush.circle(x, y, 72 * 0.5);
    brush.noFill();
    brush.set("pen", "#3a2e2a", 1.2);
    brush.circle(x, y, 72 * 0.5);
  }
  brush.noStroke();
  brush.fill("#e0c341", 170); brush.fillBleed(0.05, "out");
  brush.circle(cx, cy, 20);
  brush.noFill();
  brush.set("HB", "#6a994e", 1.5);
  brush.line(cx, cy + 30, cx, 500);
}
