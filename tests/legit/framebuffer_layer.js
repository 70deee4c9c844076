// a createFramebuffer layer painted inside its draw() scope, then composited with image()
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  const layer = createFramebuffer({ width: 512, height: 512 });
  layer.draw(() => {
    clear();
    brush.load(layer);
    brush.scaleBrushes(2);
    brush.noStroke();
    brush.fill("#3c8d5a", 190);
    brush.rect(120, 140, 260, 220);
  });
  brush.load();
  image(layer, -256, -256);
  brush.noStroke();
  brush.fill("#d94f30", 160);
  brush.circle(256, 256, 60);
}
