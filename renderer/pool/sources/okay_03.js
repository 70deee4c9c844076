function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed(6850);
  brush.scaleBrushes(2);
  const petals = 7;
  const cx = 223, cy = 284;
  for (let i = 0; i < petals; i++) {
    const a = i * 360 / petals;
    const x = cx + cos(a) * 90, y = cy + sin(a) * 90;
    brush.noStroke();
    brush.fill(random(["#e9a23b", "#d9603b", "#f4d06f", "#b5452b"]), random(120, 160));
    brush.fillBleed(random(0.05, 0.12), "out");
    brush.fillTexture(0.3, 0.3);
    brush.circle(x, y, 90 * 0.5);
    brush.noFill();
    brush.set("pen", "#3a2e2a", 1.2);
    brush.circle(x, y, 90 * 0.5);
  }
  brush.noStroke();
  brush.fill("#d9603b", 170); brush.fillBleed(0.05, "out");
  brush.circle(cx, cy, 20);
  brush.noFill();
  brush.set("HB", "#4f7942", 1.5);
  brush.line(cx, cy + 30, cx, 500);
}
