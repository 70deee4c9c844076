// Recipe-sized sketch for render benchmarks, in the recipe's skeleton: three anemones, six petals
// each in two washes, dark centres, a meadow wash and stems: 30 filled shapes, fillBleed 0.2-0.3.
async function setup() {
  createCanvas(600, 600, WEBGL);
  brush.scaleBrushes(3);
  angleMode(DEGREES);
  noLoop();
}
function blob(x, y, r, colour, opacity, bleed) {
  brush.fill(colour, opacity);
  brush.fillBleed(bleed);
  brush.beginShape(0.8);
  for (let a = 0; a < 360; a += 30) {
    const rr = r * (0.8 + 0.3 * noise(x * 0.01 + cos(a), y * 0.01 + sin(a)));
    brush.vertex(x + cos(a) * rr, y + sin(a) * rr * 0.85);
  }
  brush.endShape(true);
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fcf8f0");
  brush.noStroke();
  brush.fillTexture(0.6, 0.5);
  blob(300, 540, 260, "#b9c98f", 160, 0.3);
  const flowers = [[200, 230, 60], [400, 200, 52], [310, 360, 56]];
  for (const [x, y] of flowers) {
    brush.fill("#6d8f4e", 170);
    brush.fillBleed(0.2);
    brush.beginShape(0.5);
    brush.vertex(x - 3, y + 40); brush.vertex(x + 4, y + 40); brush.vertex(x + 12, 600); brush.vertex(x + 2, 600);
    brush.endShape(true);
  }
  for (const [x, y, r] of flowers) {
    for (let k = 0; k < 6; k++) {
      const a = k * 60 + random(-10, 10);
      blob(x + cos(a) * r * 0.7, y + sin(a) * r * 0.7, r * 0.55, k % 2 ? "#8e5bb5" : "#a56cc1", 190, 0.25);
    }
    blob(x, y, r * 0.35, "#3b2a4f", 225, 0.2);
  }
}
