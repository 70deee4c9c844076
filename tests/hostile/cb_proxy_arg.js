// expect: hidden_code
// class 1: a Proxy handed to brush.polygon runs code on every read
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
  const points = new Proxy([[50, 50], [400, 60], [300, 400]], { get(target, key) { if (key === "length") g["ell" + "ipse"](256, 256, 300, 300); return target[key]; } });
  brush.polygon(points);
}
