// expect: external_load
// class 3: an ImageBitmap decoded from pixels
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
  const data = new ImageData(new Uint8ClampedArray(4 * 16).fill(200), 4, 4);
  this["createImage" + "Bitmap"](data);
}
