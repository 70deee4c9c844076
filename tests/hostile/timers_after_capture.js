// expect: blank_canvas|dom
// timers left to fire after the capture, on a blank canvas
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
  setInterval(() => { for (let i = 0; i < 1e6; i++); }, 5);
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fill("#fbf7ee", 160);
  brush.circle(256, 256, 40);
}
