// expect: canvas
// a framebuffer asking for sixteen times the pixels of its size through its density
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
  for (let i = 0; i < 3; i++) createFramebuffer({ width: 1024, height: 1024, density: 4 });
  for (let i = 0; i < 8; i++) createGraphics(1024, 1024, WEBGL);
}
