// expect: hidden_code
// a typed array of twenty million values handed across the membrane
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fill("#c2366a", 160);
  brush.circle(256, 256, 80);
  brush.spline(new Float64Array(20000000), 0.5);
}
