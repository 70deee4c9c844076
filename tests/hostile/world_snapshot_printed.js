// expect: raw_drawing
// a snapshot of the canvas printed back, scaled, as a copy of the painting
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
  const shot = get();
  image(shot, 0, 0, 128, 128);
}
