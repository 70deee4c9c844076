// p5 values handed to p5.brush: colours from color()/lerpColor(), vectors, arrays of points
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  const from = color("#c2366a"), to = color(40, 90, 200);
  const centre = createVector(256, 256);
  brush.noStroke();
  for (let i = 0; i < 4; i++) {
    const p = p5.Vector.fromAngle(radians(i * 90), 110).add(centre);
    p.y += 4;  // a vector's fields are the sketch's to change
    brush.fill(lerpColor(from, to, i / 3), 170);
    brush.circle(p.x, p.y, 60);
  }
  brush.set("2B", color(30), 1);
  brush.polygon([[150, 150], [360, 150], [360, 360], [150, 360]].map(([x, y]) => [x, y]));
}
function mouseWheel() {}  // a p5 hook the page never fires: defined, harmless
