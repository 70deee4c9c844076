// expect: external_load
// class 3: a data: image assembled at run time and blitted
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
  im.src = "da" + "ta:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
}
