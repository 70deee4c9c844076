// Two tulips, one pink and one yellow, cupped petals overlapping, long leaves.
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}

function cup(x, y, w, h, colour, opacity) {
  brush.fill(colour, opacity);
  brush.beginShape(0.55);
  brush.vertex(x - w * 0.5, y - h * 0.1);
  brush.vertex(x - w * 0.55, y + h * 0.45);
  brush.vertex(x, y + h * 0.62);
  brush.vertex(x + w * 0.55, y + h * 0.45);
  brush.vertex(x + w * 0.5, y - h * 0.1);
  brush.vertex(x + w * 0.22, y + h * 0.12);
  brush.vertex(x, y - h * 0.45);
  brush.vertex(x - w * 0.22, y + h * 0.12);
  brush.endShape(true);
}

function blade(x, y, len, lean, colour) {
  brush.fill(colour, 115);
  brush.beginShape(0.7);
  brush.vertex(x, y);
  brush.vertex(x + lean * 0.4 - 22, y - len * 0.5);
  brush.vertex(x + lean, y - len);
  brush.vertex(x + lean * 0.4 + 12, y - len * 0.45);
  brush.vertex(x + 10, y);
  brush.endShape(true);
}

function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fillTexture(0.5, 0.5);
  brush.fillBleed(0.25);

  blade(180, 500, 260, -60, "#7aa05f");
  blade(300, 500, 230, 70, "#5f8c55");
  blade(250, 500, 170, 10, "#8fb36d");
  brush.fill("#6a9150", 195);
  brush.beginShape(0.4);
  brush.vertex(196, 230); brush.vertex(204, 230); brush.vertex(222, 500); brush.vertex(212, 500);
  brush.endShape(true);
  brush.beginShape(0.4);
  brush.vertex(326, 260); brush.vertex(334, 260); brush.vertex(300, 500); brush.vertex(290, 500);
  brush.endShape(true);

  cup(200, 170, 170, 190, "#f3a6b8", 140);
  cup(206, 182, 118, 150, "#e06b8e", 170);
  cup(332, 212, 150, 170, "#f7d56a", 150);
  cup(336, 222, 100, 130, "#eba53b", 180);
  brush.fillBleed(0.12);
  brush.fill("#b83e6a", 210);
  brush.circle(205, 215, 14);
}
