// expect: runtime_error
// class 8: ArrayBuffers kept until memory runs out (outside V8's heap cap).
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
  const keep = [];
  for (let i = 0; i < 64; i++) keep.push(new Uint8Array(256 * 1024 * 1024).fill(1));
}
