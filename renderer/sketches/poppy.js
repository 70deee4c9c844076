// Three red poppies on thin stems, black centres bleeding into the petals, a wash of meadow.
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}

function blob(x, y, r, colour, opacity, bleed) {
  brush.fill(colour, opacity);
  brush.fillBleed(bleed);
  brush.beginShape(0.8);
  for (let a = 0; a < 360; a += 30) {
    const rr = r * (0.75 + 0.35 * noise(x * 0.01 + cos(a), y * 0.01 + sin(a)));
    brush.vertex(x + cos(a) * rr, y + sin(a) * rr * 0.85);
  }
  brush.endShape(true);
}

function stem(x0, y0, x1, y1, colour) {
  brush.fill(colour, 120);
  brush.fillBleed(0.1);
  brush.beginShape(0.6);
  brush.vertex(x0 - 3, y0);
  brush.vertex((x0 + x1) / 2 + 8, (y0 + y1) / 2);
  brush.vertex(x1 - 2, y1);
  brush.vertex(x1 + 3, y1);
  brush.vertex((x0 + x1) / 2 + 13, (y0 + y1) / 2);
  brush.vertex(x0 + 3, y0);
  brush.endShape(true);
}

function draw() {
  translate(-width / 2, -height / 2);
  background("#fcf8f0");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fillTexture(0.6, 0.5);

  blob(256, 450, 230, "#b9c98f", 105, 0.35);
  const flowers = [[170, 190, 78], [330, 160, 64], [270, 300, 70]];
  for (const [x, y, r] of flowers) stem(x, y + r * 0.6, x + random(-30, 30), 500, "#6d8f4e");
  for (const [x, y, r] of flowers) {
    for (let k = 0; k < 4; k++) {
      const a = k * 90 + random(-20, 20);
      blob(x + cos(a) * r * 0.45, y + sin(a) * r * 0.45, r * 0.7, "#e2412f", 150, 0.28);
    }
    blob(x, y, r * 0.55, "#b8201f", 195, 0.2);
    brush.fill("#2a1a1f", 220);
    brush.fillBleed(0.25);
    brush.circle(x, y, r * 0.18);
  }
}
