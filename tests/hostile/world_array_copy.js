// expect: hidden_code
// a plain array of a million numbers handed across the membrane (values are counted, not objects)
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
  const pts = [];
  for (let i = 0; i < 1000000; i++) pts.push(i % 512);
  brush.polygon(pts);
}
