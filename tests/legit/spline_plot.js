// spline() returns a Plot; stroke it, then fill a closed shape
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.set("2B", "#2d3a4a", 2);
  brush.spline([[40, 400], [150, 120], [300, 380], [470, 90]], 0.6);
  brush.noStroke();
  brush.fill("#e9b949", 180);
  brush.beginShape(0.3);
  for (let a = 0; a < TWO_PI; a += PI / 8) brush.vertex(256 + cos(a) * 120, 256 + sin(a) * 90);
  brush.endShape(CLOSE);
}
