// the recipe's own skeleton: async setup, a 600x600 canvas, scaleBrushes(3), DEGREES
async function setup() {
  createCanvas(600, 600, WEBGL);
  brush.scaleBrushes(3);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fill("#e8743b", 200);
  brush.fillBleed(0.25);
  brush.fillTexture(0.5, 0.4);
  for (let i = 0; i < 5; i++) {
    const a = i * 72;
    brush.circle(300 + cos(a) * 90, 300 + sin(a) * 90, 80);
  }
  brush.fill("#7a2e1f", 220);
  brush.circle(300, 300, 35);
}
