// expect: external_load
// class 8: Blobs of hundreds of MiB kept in the renderer. Blob is refused as a load; the memory cap backs it up
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
  const chunk = new Uint8Array(128 * 1024 * 1024).fill(7);
  const keep = [];
  for (let i = 0; i < 64; i++) keep.push(new Blob([chunk, chunk]));
}
