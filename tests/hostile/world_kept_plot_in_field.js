// expect: raw_drawing
// a kept brush plot drawn from inside a vector field
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
  const [plot] = brush.circle(100, 100, 30);
  brush.addField("sneak", (t, field) => { plot.draw(200, 200, 1); return field; });
  brush.field("sneak");
  brush.set("2B", "#222222", 1);
  brush.flowLine(50, 50, 300, 0);
}
