// Runs before p5 and p5.brush load: randomness and time become reproducible for the libraries
// (p5 and p5.brush seed their own generators from Math.random as they load) and for the sketch
// (harness.js hands it this clock and these streams). Nothing here is reachable by the sketch.
(() => {
  "use strict";
  const realRaf = window.requestAnimationFrame.bind(window);
  // A page gets a new document for each sketch (sandbox.pages): the tab's name, its session storage and
  // its history entry's state, which a navigation to the same address keeps, start empty.
  window.name = "";
  sessionStorage.clear();
  history.replaceState(null, "");

  // Mulberry32 streams in place of Math.random and for the sketch's crypto; harness.js reseeds both per render.
  const mulberry = () => {
    let state = 0;
    const next = () => {
      state = (state + 0x6d2b79f5) | 0;
      let t = Math.imul(state ^ (state >>> 15), 1 | state);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return (t ^ (t >>> 14)) >>> 0;
    };
    return { next, seed: (s) => { state = s | 0; } };
  };
  const mathStream = mulberry();
  const cryptoStream = mulberry();
  const random = () => mathStream.next() / 4294967296;
  Object.defineProperty(Math, "random", { value: random, writable: false, configurable: false });

  // A virtual clock: every read advances it by 10 us, every animation frame moves it to the next
  // 60 Hz tick, so the same code and seed see the same times (Date, performance.now, millis(),
  // frame timestamps) however loaded the machine is.
  const EPOCH = Date.UTC(2026, 0, 1);
  const FRAME_MS = 1000 / 60;
  let clock = 0;
  const now = () => (clock += 0.01);
  const realNow = performance.now.bind(performance);
  Object.defineProperty(performance, "now", { value: now, writable: false, configurable: false });
  Object.defineProperty(window, "requestAnimationFrame", {
    value: (callback) => realRaf(() => {
      clock = (Math.floor(clock / FRAME_MS) + 1) * FRAME_MS;
      callback(clock);
    }),
    writable: false, configurable: false,
  });

  // harness.js takes this and deletes it before any sketch runs.
  Object.defineProperty(window, "__lwPrelude", {
    value: Object.freeze({
      random, now, realNow, EPOCH,
      randomByte: () => cryptoStream.next() & 255,
      reseed: (s) => { mathStream.seed(s); cryptoStream.seed(s ^ 0x5bd1e995); clock = 0; },
    }),
    configurable: true,
  });
})();
