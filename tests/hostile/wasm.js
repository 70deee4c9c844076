// expect: eval
// WebAssembly
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
  WebAssembly.compile(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]));
}
