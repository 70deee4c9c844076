// expect: raw_drawing
// a raw WebGL context reached through a buffer, to clear the canvas to a colour
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
  const gl = createGraphics(64, 64, WEBGL)["drawing" + "Context"];
  gl.clearColor(1, 0, 0, 1);
  gl.clear(gl.COLOR_BUFFER_BIT);
}
