function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed(7581);
  brush.scaleBrushes(2);
  const petals = 6;
  const cx = 270, cy = 287;
  for (let i = 0; i < petals; i++) {
    const a = i * 360 / petals;
    const x = cx + cos(a) * 87, y = cy + sin(a) * 87;
    brush.noStroke();
    brush.fill(random(["#9b6fc4", "#d58bd6", "#6b4f9e", "#e7c6ef"]), random(120, 160));
    brush.fillBleed(random(0.05, 0.12), "out");
    brush.fillTexture(0.3, 0.3);
    brush.circle(x, y, 87 * 0.5);
    brush.noFill();
    brush.set("pen", "#3a2e2a", 1.2);
    brush.circle(x, y, 87 * 0.5);
  }
  brush.noStroke();
  brush.fill("#9b6fc4", 170); brush.fillBleed(0.05, "out");
  brush.circle(cx, cy, 20);
  brush.noFill();
  brush.set("HB", "#4f7942", 1.5);
  brush.line(cx, cy + 30, cx, 500);
}
