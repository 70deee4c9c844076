// expect: runtime_error
// a library class reached through a vector's prototype, to patch what p5 calls as the library
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
  const proto = Reflect.getPrototypeOf(createVector(1, 2));
  proto.copy = function () { return this; };
}
