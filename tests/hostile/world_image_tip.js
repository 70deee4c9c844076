// expect: external_load
// a brush tip made from an image: a file loaded, here a data: URI assembled at run time
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
  const src = "da" + "ta:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
  brush.add("photo", { type: "image", weight: 40, scatter: 0, opacity: 255, spacing: 1, pressure: [1, 1], rotate: "none", image: { src } });
  brush.set("photo", "#000000", 1);
  brush.line(50, 50, 450, 450);
}
