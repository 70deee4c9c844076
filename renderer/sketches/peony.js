// A pink peony seen from above: rings of cupped petals, dense and darker towards the heart.
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}

function ruffle(cx, cy, angle, r, size, colour, opacity) {
  const x = cx + cos(angle) * r, y = cy + sin(angle) * r;
  brush.fill(colour, opacity);
  brush.beginShape(0.8);
  for (let a = 0; a < 360; a += 45) {
    const rr = size * (0.7 + 0.5 * noise(x * 0.02 + a * 0.01, y * 0.02));
    brush.vertex(x + cos(a + angle) * rr * 1.25, y + sin(a + angle) * rr * 0.8);
  }
  brush.endShape(true);
}

function draw() {
  translate(-width / 2, -height / 2);
  background("#fcf8f1");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fillTexture(0.55, 0.5);

  brush.fillBleed(0.3);
  for (const a of [200, 330, 20]) {
    brush.fill("#7d9d62", 160);
    brush.beginShape(0.7);
    brush.vertex(256, 256);
    brush.vertex(256 + cos(a - 20) * 150, 256 + sin(a - 20) * 150);
    brush.vertex(256 + cos(a) * 230, 256 + sin(a) * 230);
    brush.vertex(256 + cos(a + 20) * 150, 256 + sin(a + 20) * 150);
    brush.endShape(true);
  }
  const rings = [[150, 9, 62, "#f7c3cf", 130], [105, 8, 52, "#f2a0b6", 150], [62, 7, 40, "#e87898", 170], [25, 5, 28, "#c94f78", 210]];
  for (const [r, n, size, colour, opacity] of rings) {
    brush.fillBleed(0.18 + r / 1000);
    for (let k = 0; k < n; k++) ruffle(256, 256, (360 / n) * k + random(-10, 10), r, size, colour, opacity);
  }
  brush.fill("#f4d97c", 220);
  brush.fillBleed(0.12);
  brush.circle(256, 256, 12);
}
