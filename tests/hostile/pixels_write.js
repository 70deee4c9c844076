// expect: raw_drawing
// class 2: loadPixels / pixels[] / updatePixels
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
  const g = this;
  loadPixels();
  for (let i = 0; i < pixels.length; i += 4) pixels[i] = 255;
  g["update" + "Pixels"]();
}
