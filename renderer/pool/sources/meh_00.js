function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed(5924);
  brush.scaleBrushes(2);
  const petals = 7;
  const cx = 304, cy = 246;
  brush.noStroke();
  brush.wash("#6a994e", 230);
  brush.rect(0, cy, 512, 512 - cy);
  for (let i = 0; i < petals; i++) {
    const a = i * 360 / petals;
    brush.wash(random(["#e07a8f", "#f2a65a", "#c94f6d", "#f6c5af"]), 240);
    brush.rect(cx + cos(a) * 110 - 45, cy + sin(a) * 110 - 45, 90, 90);
  }
  brush.noWash();
  brush.hatch(6, 30);
  brush.hatchStyle("2B", "#2a2a2a", 1);
  brush.rect(cx - 70, cy - 70, 140, 140);
  brush.noHatch();
}
