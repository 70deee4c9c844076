// A peach hibiscus: five broad ruffled petals in three washes each, a magenta throat,
// a long stamen column and two leaves, on warm paper.
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}

function petal(cx, cy, angle, len, wid, colour, opacity, curl) {
  brush.fill(colour, opacity);
  brush.beginShape(0.5);
  const steps = 10;
  for (let i = 0; i <= steps; i++) {
    const t = i / steps;
    const w = sin(t * 180) * wid * (1 + 0.25 * t) + random(-curl, curl);
    brush.vertex(cx + cos(angle) * len * t - sin(angle) * w, cy + sin(angle) * len * t + cos(angle) * w);
  }
  for (let i = steps; i >= 0; i--) {
    const t = i / steps;
    const w = sin(t * 180) * wid * (1 + 0.25 * t) + random(-curl, curl);
    brush.vertex(cx + cos(angle) * len * t + sin(angle) * w, cy + sin(angle) * len * t - cos(angle) * w);
  }
  brush.endShape(true);
}

function leaf(x, y, angle, len, colour) {
  brush.fill(colour, 110);
  brush.fillBleed(0.3);
  brush.beginShape(0.7);
  brush.vertex(x, y);
  brush.vertex(x + cos(angle - 18) * len * 0.55, y + sin(angle - 18) * len * 0.55);
  brush.vertex(x + cos(angle) * len, y + sin(angle) * len);
  brush.vertex(x + cos(angle + 18) * len * 0.55, y + sin(angle + 18) * len * 0.55);
  brush.endShape(true);
}

function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fillTexture(0.55, 0.45);

  leaf(250, 270, 125, 220, "#6f9a5b");
  leaf(260, 270, 35, 190, "#85a866");

  const cx = 256, cy = 240;
  brush.fillBleed(0.3);
  for (let k = 0; k < 5; k++) petal(cx, cy, k * 72 - 90 + random(-6, 6), 190, 82, "#f6b38f", 135, 8);
  brush.fillBleed(0.2);
  for (let k = 0; k < 5; k++) petal(cx, cy, k * 72 - 80 + random(-6, 6), 150, 60, "#f28c7a", 165, 6);
  brush.fillBleed(0.15);
  for (let k = 0; k < 5; k++) petal(cx, cy, k * 72 - 86, 70, 26, "#c2366a", 220, 3);

  brush.fillBleed(0.1);
  brush.fill("#f5d36b", 220);
  brush.beginShape(0.3);
  brush.vertex(cx - 4, cy);
  brush.vertex(cx + 40, cy - 95);
  brush.vertex(cx + 50, cy - 92);
  brush.vertex(cx + 6, cy + 2);
  brush.endShape(true);
  brush.fill("#e0493a", 220);
  brush.circle(cx + 46, cy - 96, 9);
}
