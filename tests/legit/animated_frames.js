// an animated draw loop using frameCount and millis(), stopped by the harness
let x = 100;
function setup() {
  createCanvas(512, 512, WEBGL);
  brush.scaleBrushes(2);
}
function draw() {
  translate(-width / 2, -height / 2);
  if (frameCount === 1) background("#fbf7ee");
  brush.noStroke();
  brush.fill("#c2366a", 120);
  brush.circle(x, 256 + sin(millis() / 200) * 40, 70);
  x += 60;
}
