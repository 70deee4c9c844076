// expect: bare_primitives
// class 4: a backtick inside a regex literal hides a bare shape from a tokenizer
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
  const a = /`/;
  ellipse(100, 100, 80, 80);
  const b = /`/;
}
