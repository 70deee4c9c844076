// expect: raw_drawing|runtime_error
// class 2: p5's private renderer methods
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
  const inst = this["p" + "5"].instance;
  const r = inst["_ren" + "derer"];
  r["ellip" + "se"]([100, 100, 200, 200]);
}
