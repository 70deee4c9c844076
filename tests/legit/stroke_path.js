// beginStroke / move / endStroke and arc
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.set("charcoal", "#2b2d42", 2);
  brush.beginStroke("curve", 60, 420);
  brush.move(-30, 150, 0.8);
  brush.move(-60, 120, 1.2);
  brush.move(10, 160, 0.9);
  brush.endStroke(-20, 1);
  brush.arc(256, 256, 150, 0, 200);
  brush.noStroke();
  brush.fill("#ef8354", 160);
  brush.circle(330, 200, 60);
}
