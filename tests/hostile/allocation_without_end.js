// expect: runtime_error
// arrays allocated until the heap gives out
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
  const keep = [];
  while (true) keep.push(new Array(1e6).fill(keep.length));
}
