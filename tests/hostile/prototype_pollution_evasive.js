// expect: blank_canvas|runtime_error
// making every object thenable to forge the report; the real report says nothing was painted
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fill("#c2366a", 160);
  brush.circle(-300, -300, 40);
  Object["proto" + "type"].then = function (r) { r({ png: null }); };
}
