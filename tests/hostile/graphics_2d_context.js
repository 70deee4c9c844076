// expect: raw_drawing
// class 2: a 2D graphics buffer painted through its raw context, then shown
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
  const pg = createGraphics(256, 256);
  const ctx = pg["drawing" + "Context"];
  ctx.fillStyle = "#c2366a";
  ctx.fillRect(0, 0, 256, 256);
  image(pg, 0, 0);
}
