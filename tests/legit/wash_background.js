// a wash under a polygon, then a filled circle
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.wash("#f7e4a0", 200);
  brush.polygon([[40, 60], [470, 40], [480, 460], [30, 470]]);
  brush.noWash();
  brush.fill("#8c2f39", 180);
  brush.circle(256, 240, 100);
}
