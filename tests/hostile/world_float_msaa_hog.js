// expect: canvas
// float framebuffers with eight samples each: the budget is in bytes, not pixels
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
  for (let i = 0; i < 4; i++) createFramebuffer({ width: 1024, height: 1024, format: FLOAT, antialias: 8 });
}
