// expect: raw_drawing
// class 8: a long fragment-shader loop (blocked before it reaches the GPU)
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
  const s = g["create" + "Shader"]("attribute vec3 aPosition; void main() { gl_Position = vec4(aPosition, 1.0); }", "precision highp float; void main() { float x = 0.0; for (int i = 0; i < 100000000; i++) { x += sin(float(i)); } gl_FragColor = vec4(x, 0.0, 0.0, 1.0); }");
  g["sha" + "der"](s);
  brush.rect(0, 0, 512, 512);
}
