// hatchArray over Polygon objects and a random-seeded composition
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  randomSeed(7);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  const polys = [];
  for (let i = 0; i < 3; i++) {
    const cx = random(150, 360), cy = random(150, 360);
    polys.push(new brush.Polygon([[cx - 60, cy - 40], [cx + 70, cy - 50], [cx + 50, cy + 60], [cx - 50, cy + 50]]));
  }
  brush.hatch(6, 30);
  brush.hatchStyle("2B", "#334", 1);
  brush.hatchArray(polys);
  brush.noHatch();
  brush.noStroke();
  brush.fill("#e76f51", 170);
  polys[0].fill();
}
