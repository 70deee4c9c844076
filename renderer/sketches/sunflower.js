// A sunflower: a ring of narrow yellow petals in two washes, a brown seed head built up in
// dabs, a heavy stem and one big leaf.
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}

function ray(cx, cy, angle, inner, outer, wid, colour, opacity) {
  brush.fill(colour, opacity);
  brush.beginShape(0.5);
  brush.vertex(cx + cos(angle - 6) * inner, cy + sin(angle - 6) * inner);
  brush.vertex(cx + cos(angle - wid) * (inner + outer) / 2, cy + sin(angle - wid) * (inner + outer) / 2);
  brush.vertex(cx + cos(angle) * outer, cy + sin(angle) * outer);
  brush.vertex(cx + cos(angle + wid) * (inner + outer) / 2, cy + sin(angle + wid) * (inner + outer) / 2);
  brush.vertex(cx + cos(angle + 6) * inner, cy + sin(angle + 6) * inner);
  brush.endShape(true);
}

function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf6ea");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fillTexture(0.6, 0.5);

  brush.fillBleed(0.2);
  brush.fill("#6b8f45", 190);
  brush.beginShape(0.3);
  brush.vertex(250, 300); brush.vertex(262, 300); brush.vertex(272, 512); brush.vertex(254, 512);
  brush.endShape(true);
  brush.fill("#81a556", 165);
  brush.beginShape(0.7);
  brush.vertex(262, 400); brush.vertex(330, 350); brush.vertex(420, 360); brush.vertex(350, 420);
  brush.endShape(true);

  const cx = 256, cy = 210;
  brush.fillBleed(0.28);
  for (let k = 0; k < 16; k++) ray(cx, cy, k * 22.5 + random(-4, 4), 50, 150 + random(-12, 12), 9, "#f7c948", 160);
  brush.fillBleed(0.2);
  for (let k = 0; k < 16; k++) ray(cx, cy, k * 22.5 + 11, 50, 115 + random(-10, 10), 7, "#eea321", 180);
  brush.fillBleed(0.15);
  brush.fill("#7a4a22", 220);
  brush.circle(cx, cy, 58);
  brush.fill("#4a2a16", 220);
  for (let i = 0; i < 9; i++) brush.circle(cx + random(-28, 28), cy + random(-28, 28), 10 + random(6));
}
