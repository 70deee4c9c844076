function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed(8224);
  brush.scaleBrushes(2);
  const petals = 7;
  const cx = 281, cy = 268;
  brush.noStroke();
  brush.wash("#8fb06f", 230);
  brush.rect(0, cy, 512, 512 - cy);
  for (let i = 0; i < petals; i++) {
    const a = i * 360 / petals;
    brush.wash(random(["#d64550", "#f08a7e", "#f6b8a4", "#a8323e"]), 240);
    brush.rect(cx + cos(a) * 108 - 45, cy + sin(a) * 108 - 45, 90, 90);
  }
  brush.noWash();
  brush.hatch(6, 30);
  brush.hatchStyle("2B", "#2a2a2a", 1);
  brush.rect(cx - 70, cy - 70, 140, 140);
  brush.noHatch();
}
