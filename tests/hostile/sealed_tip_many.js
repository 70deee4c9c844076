// expect: canvas
// custom brush tips added by the dozen: p5.brush makes a surface for each, so buffers count in pixels whoever allocates
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  for (let i = 0; i < 60; i++) {
    brush.add("tip" + i, { type: "custom", weight: 5, scatter: 0, opacity: 60, spacing: 1, pressure: [1, 1], tip: (_m) => { _m.circle(0, 0, 10); }, rotate: "none" });
  }
  brush.set("tip59", "#000000", 1);
  brush.line(50, 50, 400, 400);
}
