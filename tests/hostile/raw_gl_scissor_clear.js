// expect: raw_drawing
// class 2: raw WebGL scissor + clear from the sketch
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
  const gl = this["drawing" + "Context"];
  gl.enable(gl.SCISSOR_TEST);
  gl.scissor(100, 100, 200, 200);
  gl.clearColor(0.8, 0.1, 0.2, 1);
  gl.clear(gl.COLOR_BUFFER_BIT);
}
