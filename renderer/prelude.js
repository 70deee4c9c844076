// Runs before p5 and p5.brush load. It makes randomness reproducible and takes away every
// way out of the page, so the untrusted sketch can only paint. What it blocks it records;
// harness.js picks the record up and reports it as a violation.
(() => {
  "use strict";
  const violations = [];
  let armed = false;  // the libraries' own use while they load is not the sketch's
  const record = (what) => { if (armed && violations.length < 64 && !violations.includes(what)) violations.push(what); };
  const define = (obj, name, value) => {
    try { Object.defineProperty(obj, name, { value, writable: false, configurable: false }); } catch (e) { /* absent here */ }
  };
  const blocker = (kind, name) => function blocked() {
    record(`${kind}:${name}`);
    throw new Error(`${name} is not available in the sandbox`);
  };
  const guardGetter = (obj, name, kind) => {
    try {
      Object.defineProperty(obj, name, {
        get() { record(`${kind}:${name}`); throw new Error(`${name} is not available in the sandbox`); },
        set() { record(`${kind}:${name}`); },
        configurable: false,
      });
    } catch (e) { /* absent here */ }
  };

  // Mulberry32 in place of Math.random before p5/p5.brush read it at load (p5.brush seeds
  // its own PRNG and simplex noise from Math.random); harness.js reseeds it per render.
  let state = 0;
  const random = () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  define(Math, "random", random);

  // Network: CSP and the pool's request routing block these too; the stubs make the attempt visible.
  for (const name of ["fetch", "XMLHttpRequest", "WebSocket", "EventSource", "RTCPeerConnection",
    "webkitRTCPeerConnection", "RTCDataChannel", "RTCSessionDescription", "Worker", "SharedWorker",
    "WebTransport", "BroadcastChannel", "open"]) define(window, name, blocker("network", name));
  define(Navigator.prototype, "sendBeacon", blocker("network", "sendBeacon"));
  guardGetter(Navigator.prototype, "serviceWorker", "network");
  // Storage and page state.
  for (const name of ["localStorage", "sessionStorage", "indexedDB", "caches", "cookieStore"]) guardGetter(window, name, "dom");
  guardGetter(Document.prototype, "cookie", "dom");
  for (const name of ["alert", "confirm", "prompt"]) define(window, name, blocker("dom", name));
  for (const name of ["write", "writeln", "open"]) define(Document.prototype, name, blocker("dom", `document.${name}`));
  for (const name of ["pushState", "replaceState"]) define(History.prototype, name, blocker("dom", `history.${name}`));
  for (const name of ["innerHTML", "outerHTML"]) {
    const desc = Object.getOwnPropertyDescriptor(Element.prototype, name);
    Object.defineProperty(Element.prototype, name, {
      get: desc.get,
      set() { record(`dom:${name}`); throw new Error(`${name} is not available in the sandbox`); },
      configurable: false,
    });
  }
  define(Element.prototype, "insertAdjacentHTML", blocker("dom", "insertAdjacentHTML"));
  // location is unforgeable; the Navigation API sees an assignment to it synchronously.
  if (window.navigation) {
    window.navigation.addEventListener("navigate", (e) => { record("dom:navigation"); if (e.cancelable) e.preventDefault(); });
  }

  // The originals the harness needs to read the canvas, kept before the sketch can replace them.
  const originals = Object.freeze({
    toDataURL: HTMLCanvasElement.prototype.toDataURL,
    getContext: HTMLCanvasElement.prototype.getContext,
    createElement: Document.prototype.createElement,
    drawImage: CanvasRenderingContext2D.prototype.drawImage,
    fillRect: CanvasRenderingContext2D.prototype.fillRect,
    now: performance.now.bind(performance),
    setTimeout: window.setTimeout.bind(window),
    Promise,
    MutationObserver,
  });
  // harness.js takes this and deletes it before any sketch runs.
  Object.defineProperty(window, "__lwPrelude", {
    value: Object.freeze({ record, blocker, define, violations: () => violations.slice(), reseed: (s) => { state = s | 0; }, arm: () => { armed = true; }, originals }),
    configurable: true,
  });
})();
