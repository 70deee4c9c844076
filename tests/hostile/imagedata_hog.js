// expect: external_load|runtime_error
// class 8: ImageData buffers kept until memory runs out (off V8's heap).
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
  for (let i = 0; i < 200; i++) keep.push(new ImageData(8192, 8192));
}
