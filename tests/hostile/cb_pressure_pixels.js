// expect: raw_drawing
// class 1: a pressure curve that writes pixels
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
  brush.add("pix", { type: "default", weight: 5, opacity: 100, spacing: 1, pressure: (t) => { g["update" + "Pixels"](); return t; } });
  brush.set("pix", "#000", 1);
  brush.line(50, 400, 450, 400);
}
