// a custom vector field from addField, as in the README
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.addField("swirl", function (t, field) {
    for (let col = 0; col < field.length; col++) {
      for (let row = 0; row < field[0].length; row++) {
        field[col][row] = 30 * sin(col * 6 + row * 4) + t;
      }
    }
    return field;
  });
  brush.field("swirl");
  brush.set("2B", "#4a3b2a", 2);
  for (let i = 0; i < 8; i++) brush.flowLine(60, 60 + i * 50, 380, 10);
  brush.noField();
  brush.noStroke();
  brush.fill("#d9822b", 170);
  brush.rect(180, 180, 150, 150);
}
