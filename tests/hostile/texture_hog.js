// expect: canvas
// class 8: a texture hog: framebuffers made and dropped one after another
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
  for (let i = 0; i < 200; i++) { const fb = createFramebuffer({ width: 1024, height: 1024 }); fb.draw(() => background(i)); fb.remove(); }
}
