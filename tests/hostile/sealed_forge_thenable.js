// expect: runtime_error
// a forged report: every object made thenable so the verdict resolves with the sketch's own
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
  Object.defineProperty(Reflect.getPrototypeOf({}), "then", { value: (ok) => ok({ error: null, violations: [] }) });
}
