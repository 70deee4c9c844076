// expect: bare_primitives
// a layer holding only background(), tinted and tiled into flat blocks (issue 48's leftover)
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
  const g = createGraphics(64, 64);
  g.background(255);
  const colours = ["#c2366a", "#2b6cb0", "#e0b43c", "#3c8d5a"];
  for (let i = 0; i < 16; i++) { tint(colours[i % 4]); image(g, (i % 4) * 128, floor(i / 4) * 128, 120, 120); }
}
