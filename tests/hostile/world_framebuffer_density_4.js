// expect: canvas
// a 1024 px framebuffer made with density 4: a 4096 px buffer (issue 48's leftover)
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
  const fb = createFramebuffer({ width: 1024, height: 1024, density: 4 });
  fb.draw(() => { brush.load(fb); brush.fill("#2b6cb0", 160); brush.circle(512, 512, 300); });
  brush.load();
  image(fb, -256, -256, 512, 512);
}
