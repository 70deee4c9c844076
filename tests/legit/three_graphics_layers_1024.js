// three 1024 px WEBGL layers (createGraphics), each painted with p5.brush and composited: within the byte budget
function setup() {
  createCanvas(1024, 1024, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  const colours = ["#2b6cb0", "#c2366a", "#e0b43c"];
  const layers = colours.map(() => createGraphics(1024, 1024, WEBGL));
  layers.forEach((layer, i) => {
    brush.load(layer);
    brush.scaleBrushes(3);
    brush.noStroke();
    brush.fill(colours[i], 150);
    brush.circle(-120 + i * 120, -60 + i * 60, 220);
  });
  brush.load();
  for (const layer of layers) image(layer, 0, 0);
}
