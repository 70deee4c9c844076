// p5's clock functions pick the colours: virtual time, so one seed paints one picture
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  const t = second() + minute() * 60 + hour() * 3600 + day() + month() + year() + millis();
  colorMode(HSB, 360, 100, 100);
  brush.fill(color(200 + (t % 120), 70, 55), 200);
  brush.circle(256, 256, 90 + (t % 40));
  print("painted at", t);
}
