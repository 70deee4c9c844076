// expect: canvas
// buffers whose pixel density is raised after they are made, then more buffers
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
  const layers = [];
  for (let i = 0; i < 12; i++) { const g = createGraphics(1024, 1024); g.pixelDensity(8); layers.push(g); }
}
