// expect: canvas
// buffers made by buffers, where a count per sketch would not look
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
  const pg = createGraphics(64, 64, WEBGL);
  const kept = [];
  for (let i = 0; i < 12; i++) kept.push(pg.createFramebuffer({ width: 1024, height: 1024 }));
}
