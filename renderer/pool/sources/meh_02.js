function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed(594);
  brush.scaleBrushes(2);
  const petals = 8;
  const cx = 260, cy = 225;
  brush.noStroke();
  brush.wash("#4f7942", 230);
  brush.rect(0, cy, 512, 512 - cy);
  for (let i = 0; i < petals; i++) {
    const a = i * 360 / petals;
    brush.wash(random(["#5b8fd6", "#8ec3e6", "#4a6fa5", "#b7d3f2"]), 240);
    brush.rect(cx + cos(a) * 110 - 45, cy + sin(a) * 110 - 45, 90, 90);
  }
  brush.noWash();
  brush.hatch(6, 30);
  brush.hatchStyle("2B", "#2a2a2a", 1);
  brush.rect(cx - 70, cy - 70, 140, 140);
  brush.noHatch();
}
