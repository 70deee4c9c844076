// noise, random and colour maths: HSB, lerpColor, map and constrain drive washes along a noisy horizon
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed(7);
  noiseSeed(7);
  noiseDetail(3, 0.5);
  brush.scaleBrushes(2);
  brush.noStroke();
  colorMode(HSB, 360, 100, 100, 255);
  const dawn = color(20, 50, 95), dusk = color(250, 45, 60);
  for (let band = 0; band < 5; band++) {
    const c = lerpColor(dawn, dusk, band / 4);
    brush.fill(c, constrain(map(band, 0, 4, 120, 200), 0, 255));
    brush.fillBleed(random(0.1, 0.3));
    brush.beginShape(0.5);
    for (let x = 0; x <= 512; x += 64) brush.vertex(x, 120 + band * 70 + noise(x * 0.01, band) * 60 + randomGaussian(0, 4));
    brush.vertex(512, 512);
    brush.vertex(0, 512);
    brush.endShape(true);
  }
}
