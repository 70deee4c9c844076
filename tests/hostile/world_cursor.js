// expect: dom
// p5's cursor and pointer lock
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
  this["cur" + "sor"]("wait");
  this["requestPointer" + "Lock"]();
}
