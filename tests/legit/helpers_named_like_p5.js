// local helpers and variables that share names with p5 functions are the sketch's own
function loadPalette() {
  return ["#c2366a", "#e8743b", "#3c8d5a"];
}
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  const palette = loadPalette();
  const point = (x, y) => ({ x, y });
  const ellipse = (c, r, colour) => { brush.fill(colour, 170); brush.circle(c.x, c.y, r); };
  let location = point(256, 256);
  const text = "a flower";
  for (let i = 0; i < palette.length; i++) {
    ellipse(point(location.x + (i - 1) * 110, location.y), 70, palette[i]);
  }
}
