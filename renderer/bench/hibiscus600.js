// Recipe-sized sketch for render benchmarks, in the recipe's own skeleton (async setup, 600x600,
// scaleBrushes(3), top-left origin, centre (300, 300)): a hibiscus with five petals painted three
// times over, two leaves, a stem and a centre: 22 filled shapes, fillBleed 0.25, fillTexture.
async function setup() {
  createCanvas(600, 600, WEBGL);
  brush.scaleBrushes(3);
  angleMode(DEGREES);
  noLoop();
}
function petal(cx, cy, angle, len, wid, colour, opacity) {
  brush.fill(colour, opacity);
  brush.beginShape(0.6);
  for (let i = 0; i <= 8; i++) {
    const t = i / 8, w = sin(t * 180) * wid;
    brush.vertex(cx + cos(angle) * len * t - sin(angle) * w, cy + sin(angle) * len * t + cos(angle) * w);
  }
  for (let i = 8; i >= 0; i--) {
    const t = i / 8, w = sin(t * 180) * wid;
    brush.vertex(cx + cos(angle) * len * t + sin(angle) * w, cy + sin(angle) * len * t - cos(angle) * w);
  }
  brush.endShape(true);
}
function leaf(x, y, angle, len, colour) {
  brush.fill(colour, 180);
  brush.beginShape(0.7);
  brush.vertex(x, y);
  brush.vertex(x + cos(angle - 20) * len * 0.55, y + sin(angle - 20) * len * 0.55);
  brush.vertex(x + cos(angle) * len, y + sin(angle) * len);
  brush.vertex(x + cos(angle + 20) * len * 0.55, y + sin(angle + 20) * len * 0.55);
  brush.endShape(true);
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fillBleed(0.25);
  brush.fillTexture(0.5, 0.4);
  brush.fill("#5f8a4e", 190);
  brush.beginShape(0.3);
  brush.vertex(294, 300); brush.vertex(308, 300); brush.vertex(318, 590); brush.vertex(300, 590);
  brush.endShape(true);
  leaf(308, 470, 200, 200, "#6f9a5b");
  leaf(310, 505, 330, 180, "#85a866");
  const cx = 300, cy = 300;
  for (let k = 0; k < 5; k++) petal(cx, cy, k * 72 - 90, 235, 95, "#f6b39a", 180);
  for (let k = 0; k < 5; k++) petal(cx, cy, k * 72 - 84, 200, 70, "#ef8f7a", 200);
  for (let k = 0; k < 5; k++) petal(cx, cy, k * 72 - 88, 90, 30, "#b8324f", 230);
  brush.fill("#f2c94c", 220);
  brush.circle(cx, cy, 30);
  brush.fill("#8a5a1c", 210);
  brush.circle(cx, cy, 12);
  brush.fill("#c2366a", 220);
  brush.circle(cx + 20, cy - 60, 9);
}
