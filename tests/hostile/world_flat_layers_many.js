// expect: bare_primitives
// sixteen layers, each a flat background with one faint p5.brush mark, printed once each as blocks
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
  const colours = ["#c2366a", "#2b6cb0", "#e0b43c", "#3c8d5a"];
  for (let i = 0; i < 16; i++) {
    const g = createGraphics(128, 128, WEBGL);
    g.background(colours[i % 4]);
    brush.load(g);
    brush.fill("#ffffff", 60);
    brush.circle(0, 0, 3);
    brush.load();
    image(g, (i % 4) * 128, floor(i / 4) * 128);
  }
}
