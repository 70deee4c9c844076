// expect: canvas
// canvas snapshots by the hundred: get()'s copies are the sketch's bytes
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
  const shots = [];
  for (let i = 0; i < 200; i++) shots.push(get());
}
