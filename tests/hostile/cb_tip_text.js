// expect: text
// class 1: a custom brush tip writing text on its stamp surface
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
  brush.add("letters", { type: "custom", weight: 20, opacity: 200, spacing: 1, tip: (_m) => { _m.fill(0); _m.textSize(40); _m["te" + "xt"]("HI", -30, 15); } });
  brush.set("letters", "#000", 1);
  brush.line(50, 400, 450, 400);
}
