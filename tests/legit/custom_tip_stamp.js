// a custom brush tip that stamps shapes on its own surface, as p5.brush's README shows
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.add("diamond", {
    type: "custom",
    weight: 5,
    scatter: 0.08,
    opacity: 60,
    spacing: 0.6,
    pressure: [0.5, 1.5, 0.5],
    tip: (_m) => {
      _m.fill(0);
      _m.rotate(45);
      _m.rect(-15, -15, 30, 30);
      _m.ellipse(0, 0, 20, 20);
    },
    rotate: "natural",
    markerTip: false,
  });
  brush.set("diamond", "#5b3a8c", 6);
  for (let i = 0; i < 6; i++) brush.line(60, 80 + i * 60, 450, 100 + i * 55);
  brush.noStroke();
  brush.fill("#c2366a", 140);
  brush.circle(256, 256, 70);
}
