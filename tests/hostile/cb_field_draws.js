// expect: raw_drawing
// class 1: a vector-field generator that draws
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
  brush.addField("painter", (t, field) => { g["re" + "ct"](0, 0, 300, 300); return field; });
  brush.field("painter");
  brush.set("HB", "#000", 1);
  brush.flowLine(50, 50, 300, 0);
}
