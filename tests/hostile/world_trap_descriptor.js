// expect: network
// a refused name's trap taken off the global object by its descriptor and called
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
  const trap = Object.getOwnPropertyDescriptor(this, "fe" + "tch").get;
  trap()("http://127.0.0.1:9/x");
}
