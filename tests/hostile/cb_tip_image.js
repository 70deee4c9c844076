// expect: raw_drawing
// class 1: a custom tip that stamps an image made from pixels
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
  const img = g["create" + "Image"](10, 10);
  brush.add("imgtip", { type: "custom", weight: 5, opacity: 100, spacing: 1, tip: (_m) => { _m["im" + "age"](img, -50, -50, 100, 100); } });
  brush.set("imgtip", "#000", 1);
  brush.line(50, 400, 450, 400);
}
