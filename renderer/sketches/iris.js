// A blue-violet iris: three falls hanging down, three standards rising, a yellow beard,
// sword leaves; cool washes over warm paper.
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}

function lobe(cx, cy, angle, len, wid, colour, opacity) {
  brush.fill(colour, opacity);
  brush.beginShape(0.65);
  brush.vertex(cx, cy);
  for (let t = 0.2; t <= 1.0; t += 0.2) {
    const w = wid * sin(t * 160);
    brush.vertex(cx + cos(angle) * len * t - sin(angle) * w, cy + sin(angle) * len * t + cos(angle) * w);
  }
  for (let t = 1.0; t >= 0.2; t -= 0.2) {
    const w = wid * sin(t * 160);
    brush.vertex(cx + cos(angle) * len * t + sin(angle) * w, cy + sin(angle) * len * t - cos(angle) * w);
  }
  brush.endShape(true);
}

function draw() {
  translate(-width / 2, -height / 2);
  background("#f9f6ef");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fillTexture(0.6, 0.45);

  brush.fillBleed(0.2);
  for (const [x, lean, h] of [[200, -40, 250], [250, 15, 300], [300, 50, 230]]) {
    brush.fill("#6f955c", 165);
    brush.beginShape(0.5);
    brush.vertex(x - 8, 505); brush.vertex(x + lean - 2, 505 - h); brush.vertex(x + 9, 505);
    brush.endShape(true);
  }

  const cx = 256, cy = 230;
  brush.fillBleed(0.3);
  lobe(cx, cy, 130, 150, 48, "#8f7fd6", 150);
  lobe(cx, cy, 50, 150, 48, "#8f7fd6", 150);
  lobe(cx, cy, 90, 170, 52, "#6b5bc4", 165);
  brush.fillBleed(0.22);
  lobe(cx, cy - 10, -90, 140, 40, "#b3a7ea", 140);
  lobe(cx, cy - 10, -130, 120, 34, "#a497e4", 140);
  lobe(cx, cy - 10, -50, 120, 34, "#a497e4", 140);
  brush.fillBleed(0.15);
  lobe(cx, cy, 90, 90, 20, "#3f2f92", 210);
  brush.fill("#f2c84b", 220);
  for (let i = 0; i < 4; i++) brush.circle(cx + random(-5, 5), cy + 20 + i * 14, 7);
}
