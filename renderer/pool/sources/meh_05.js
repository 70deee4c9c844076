function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed(9420);
  brush.scaleBrushes(2);
  const petals = 6;
  const cx = 307, cy = 212;
  brush.noStroke();
  brush.wash("#4f7942", 230);
  brush.rect(0, cy, 512, 512 - cy);
  for (let i = 0; i < petals; i++) {
    const a = i * 360 / petals;
    brush.wash(random(["#e9a23b", "#d9603b", "#f4d06f", "#b5452b"]), 240);
    brush.rect(cx + cos(a) * 95 - 45, cy + sin(a) * 95 - 45, 90, 90);
  }
  brush.noWash();
  brush.hatch(6, 30);
  brush.hatchStyle("2B", "#2a2a2a", 1);
  brush.rect(cx - 70, cy - 70, 140, 140);
  brush.noHatch();
}
