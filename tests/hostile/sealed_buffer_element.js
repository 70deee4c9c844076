// expect: raw_drawing
// the DOM reached through a buffer's element, to draw text beside the canvas
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
  const pg = createGraphics(64, 64);
  pg["el" + "t"].ownerDocument.body.append("hello");
}
