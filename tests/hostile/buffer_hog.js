// expect: canvas
// class 8: hundreds of framebuffers (a GPU-memory hog)
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
  for (let i = 0; i < 400; i++) keep.push(createFramebuffer({ width: 1024, height: 1024 }));
}
