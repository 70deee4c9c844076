// expect: raw_drawing
// the sketch's own shader, reached through this
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
  const s = this["create" + "Shader"]("void main(){}", "void main(){}");
  this["sha" + "der"](s);
}
