// expect: runtime_error
// an unhandled rejection with a string
async function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
  await Promise.reject("nope");
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fill("#c2366a", 160);
  brush.circle(256, 256, 80);
}
