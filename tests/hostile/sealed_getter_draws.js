// expect: bare_primitives|raw_drawing
// a getter in brush arguments that draws a bare shape while p5.brush reads it
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
  brush.circle(100, 100, { get valueOf() { return () => { g["ell" + "ipse"](100, 100, 50, 50); return 40; }; } });
}
