function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed(9714);
  brush.scaleBrushes(2);
  const petals = 6;
  const cx = 242, cy = 276;
  for (let i = 0; i < petals; i++) {
    const a = i * 360 / petals;
    const x = cx + cos(a) * 100, y = cy + sin(a) * 100;
    brush.noStroke();
    brush.fill(random(["#d64550", "#f08a7e", "#f6b8a4", "#a8323e"]), random(120, 160));
    brush.fillBleed(random(0.05, 0.12), "out");
    brush.fillTexture(0.3, 0.3);
    brush.circle(x, y, 100 * 0.5);
    brush.noFill();
    brush.set("pen", "#3a2e2a", 1.2);
    brush.circle(x, y, 100 * 0.5);
  }
  brush.noStroke();
  brush.fill("#a8323e", 170); brush.fillBleed(0.05, "out");
  brush.circle(cx, cy, 20);
  brush.noFill();
  brush.set("HB", "#6a994e", 1.5);
  brush.line(cx, cy + 30, cx, 500);
}
