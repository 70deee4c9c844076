// A white anemone: petals left almost paper-white, shaped only by a pale grey-violet shadow
// wash at their edges, with a dark ink-blue centre bleeding out.
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}

function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf8f2");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fillTexture(0.65, 0.6);

  brush.fillBleed(0.35);
  brush.fill("#94b878", 150);
  brush.circle(170, 400, 90);
  brush.fill("#b5cc90", 140);
  brush.circle(360, 420, 70);

  const cx = 256, cy = 240;
  for (let k = 0; k < 6; k++) {
    const a = k * 60 + random(-8, 8);
    const x = cx + cos(a) * 95, y = cy + sin(a) * 95;
    brush.fillBleed(0.3);
    brush.fill("#b9b0d6", 150);
    brush.beginShape(0.8);
    for (let b = 0; b < 360; b += 40) brush.vertex(x + cos(b + a) * 88, y + sin(b + a) * 62);
    brush.endShape(true);
    brush.fill("#f4f1f6", 180);
    brush.circle(x + cos(a) * 10, y + sin(a) * 10, 44);
  }
  brush.fillBleed(0.3);
  brush.fill("#2d3561", 220);
  brush.circle(cx, cy, 34);
  brush.fillBleed(0.12);
  brush.fill("#161a33", 220);
  brush.circle(cx, cy, 16);
}
