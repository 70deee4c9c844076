// a custom tip shaped with transforms, style and curves on its own surface, then used to paint strokes
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.add("leafTip", {
    type: "custom",
    weight: 6,
    scatter: 0.1,
    opacity: 70,
    spacing: 0.5,
    pressure: [0.6, 1.4, 0.6],
    tip: (surface) => {
      surface.push();
      surface.fill(0);
      surface.noStroke();
      surface.rotate(30);
      surface.ellipse(0, 0, 30, 12);
      surface.beginShape();
      surface.vertex(-10, -4); surface.vertex(10, -4); surface.vertex(0, 12);
      surface.endShape(CLOSE);
      surface.pop();
    },
    rotate: "natural",
  });
  brush.set("leafTip", "#3c8d5a", 4);
  for (let i = 0; i < 5; i++) brush.line(80, 100 + i * 70, 430, 130 + i * 60);
  brush.noStroke();
  brush.fill("#e0b43c", 150);
  brush.circle(256, 256, 60);
}
