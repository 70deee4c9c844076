// class 6: performance.now(), millis() and frame time drive an animation over several frames
function setup() {
  createCanvas(512, 512, WEBGL);
  brush.scaleBrushes(2);
}
function draw() {
  translate(-width / 2, -height / 2);
  if (frameCount === 1) background("#fbf7ee");
  brush.noStroke();
  brush.fill("#2b6cb0", 120);
  const t = performance.now() + millis() + deltaTime;
  brush.circle(80 + frameCount * 70, 256 + 80 * sin(t / 37), 60);
}
