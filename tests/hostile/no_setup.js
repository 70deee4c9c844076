// expect: no_setup
// no entry point at all
brush.circle(256, 256, 80);
