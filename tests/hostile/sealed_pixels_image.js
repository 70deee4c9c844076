// expect: raw_drawing
// an image made pixel by pixel, then drawn onto the canvas
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
  const img = createImage(64, 64);
  for (let x = 0; x < 64; x++) img.set(x, x, color(0));
  image(img, 0, 0);
}
