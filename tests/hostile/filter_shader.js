// expect: raw_drawing
// class 2: filter() with the sketch's own shader
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
  const g = this;
  const s = g["createFilter" + "Shader"]("precision highp float; void main() { gl_FragColor = vec4(1.0, 0.0, 0.0, 1.0); }");
  filter(s);
}
