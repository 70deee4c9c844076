// expect: timeout
// an endless chain of microtasks starves the event loop
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
  const spin = () => Promise.resolve().then(spin);
  spin();
}
