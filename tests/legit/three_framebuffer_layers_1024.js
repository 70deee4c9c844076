// three 1024 px framebuffers, each painted with p5.brush inside its draw scope and composited: within the byte budget
function setup() {
  createCanvas(1024, 1024, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  const colours = ["#3c8d5a", "#d94f30", "#5b3a8c"];
  const layers = colours.map(() => createFramebuffer({ width: 1024, height: 1024 }));
  layers.forEach((layer, i) => {
    layer.draw(() => {
      clear();
      brush.load(layer);
      brush.scaleBrushes(3);
      brush.noStroke();
      brush.fill(colours[i], 160);
      brush.rect(200 + i * 160, 240 + i * 100, 360, 300);
    });
  });
  brush.load();
  for (const layer of layers) image(layer, 0, 0);
}
