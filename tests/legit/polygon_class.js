// the documented Polygon class with .fill() and .draw()
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  const petal = new brush.Polygon([[256, 120], [330, 250], [256, 400], [180, 250]]);
  brush.noStroke();
  brush.fill("#c2366a", 170);
  brush.fillBleed(0.2);
  petal.fill();
  brush.set("HB", "#3a1f2b", 1);
  petal.draw();
}
