// expect: external_load
// class 3: a data: image through srcset
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
  const im = new Image();
  im["src" + "set"] = ["da", "ta:image/gif;base64,R0lGODlhAQABAAAAACw="].join("") + " 1x";
}
