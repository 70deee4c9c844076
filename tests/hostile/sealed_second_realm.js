// expect: dom
// a second realm through an iframe, where nothing is guarded
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
  const frame = g["docu" + "ment"].createElement("iframe");
  frame.contentWindow.fetch("http://example.com");
}
