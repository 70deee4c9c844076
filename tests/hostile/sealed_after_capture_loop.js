// expect: timeout
// work left running after its picture is taken (a microtask loop past a throw): its own time, so a timeout
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
  const again = async () => { for (let i = 0; i < 1e9; i++) { await null; } };
  const g = this;
  again().then(() => g["ell" + "ipse"](1, 1, 1, 1));
  throw new Error("never reached in time");
}
