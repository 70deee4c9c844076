// Runs before p5 and p5.brush load. It makes randomness and time reproducible and takes away
// every way out of the page, so the untrusted sketch can only paint. What it blocks it
// records; harness.js picks the record up and reports it as a violation.
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
  // window.name outlives the document when the pool reuses the page: each sketch starts with none.
  window.name = "";
  const realNow = performance.now.bind(performance);
  const realRaf = window.requestAnimationFrame.bind(window);

  // Mulberry32 streams in place of Math.random (read by p5/p5.brush at load to seed their own
  // PRNG and noise) and crypto's random bytes; harness.js reseeds both per render.
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
  define(Math, "random", () => mathStream.next() / 4294967296);
  const getRandomValues = function getRandomValues(array) {
    if (!ArrayBuffer.isView(array) || array instanceof Float32Array || array instanceof Float64Array) {
      throw new TypeError("getRandomValues needs an integer typed array");
    }
    const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
    for (let i = 0; i < bytes.length; i++) bytes[i] = cryptoStream.next() & 255;
    return array;
  };
  define(Crypto.prototype, "getRandomValues", getRandomValues);
  define(Crypto.prototype, "randomUUID", function randomUUID() {
    const b = getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  });
  guardGetter(Crypto.prototype, "subtle", "dom");

  // A virtual clock: every read advances it by 10 us, every animation frame moves it to the next
  // 60 Hz tick, so the same code and seed see the same times (Date, performance.now, millis(),
  // frame timestamps) however loaded the machine is.
  const EPOCH = Date.UTC(2026, 0, 1);
  const FRAME_MS = 1000 / 60;
  let clock = 0;
  const now = () => (clock += 0.01);
  define(Performance.prototype, "now", function () { return now(); });
  define(performance, "now", function () { return now(); });
  define(performance, "timeOrigin", EPOCH);
  const RealDate = Date;
  function VirtualDate(...args) {
    const t = EPOCH + Math.floor(now());
    if (!new.target) return new RealDate(t).toString();
    return Reflect.construct(RealDate, args.length ? args : [t], new.target);
  }
  VirtualDate.prototype = RealDate.prototype;
  VirtualDate.now = () => EPOCH + Math.floor(now());
  VirtualDate.parse = RealDate.parse;
  VirtualDate.UTC = RealDate.UTC;
  define(RealDate.prototype, "constructor", VirtualDate);
  define(window, "Date", VirtualDate);
  define(window, "requestAnimationFrame", function requestAnimationFrame(callback) {
    return realRaf(() => {
      clock = (Math.floor(clock / FRAME_MS) + 1) * FRAME_MS;
      callback(clock);
    });
  });
  // The stack trace tells the sketch's calls from the libraries' (harness.js): it cannot be cut short or forged.
  define(Error, "stackTraceLimit", 50);
  define(Error, "prepareStackTrace", undefined);
  define(Error, "captureStackTrace", Error.captureStackTrace);

  // Proxies are remembered, so that harness.js can refuse one handed to p5.brush.
  const proxies = new WeakSet();
  const RealProxy = Proxy;
  const TrackedProxy = new RealProxy(RealProxy, {
    construct(target, args, newTarget) { const p = Reflect.construct(target, args, newTarget); proxies.add(p); return p; },
  });
  define(TrackedProxy, "revocable", (target, handler) => { const r = RealProxy.revocable(target, handler); proxies.add(r.proxy); return r; });
  define(window, "Proxy", TrackedProxy);

  // Network: CSP and the pool's request routing block these too; the stubs make the attempt visible.
  for (const name of ["fetch", "XMLHttpRequest", "WebSocket", "EventSource", "RTCPeerConnection",
    "webkitRTCPeerConnection", "RTCDataChannel", "RTCSessionDescription", "Worker", "SharedWorker",
    "WebTransport", "BroadcastChannel", "open"]) define(window, name, blocker("network", name));
  define(Navigator.prototype, "sendBeacon", blocker("network", "sendBeacon"));
  guardGetter(Navigator.prototype, "serviceWorker", "network");
  // Images: p5 and p5.brush decode none (p5.brush only for "image" brush tips, which load a file),
  // so an image source, data: and blob: included, is a load (or a request); CSP refuses them too.
  for (const proto of [HTMLImageElement.prototype, HTMLSourceElement.prototype]) {
    for (const name of ["src", "srcset"]) {
      const desc = Object.getOwnPropertyDescriptor(proto, name);
      if (!desc) continue;
      Object.defineProperty(proto, name, {
        get: desc.get,
        set(value) {
          const inline = /^\s*(data|blob):/i.test(String(value));
          record(inline ? `load:image:${name}` : `network:image:${name}`);
          throw new Error("images are not available in the sandbox");
        },
        configurable: false,
      });
    }
  }
  for (const name of ["createImageBitmap", "ImageDecoder"]) define(window, name, blocker("load", name));
  // Blobs and Files live outside V8's heap (the browser keeps them, then spills them to disk), and a sketch
  // has no use for one (saving and loading are refused): making one is a load. p5 itself makes none at load.
  for (const name of ["Blob", "File"]) {
    const Native = window[name];
    define(window, name, function (...args) {
      if (armed) { record(`load:${name}`); throw new Error(`${name} is not available in the sandbox`); }
      return Reflect.construct(Native, args, new.target || Native);
    });
  }
  // Storage and page state.
  for (const name of ["localStorage", "sessionStorage", "indexedDB", "caches", "cookieStore"]) guardGetter(window, name, "dom");
  guardGetter(Document.prototype, "cookie", "dom");
  for (const name of ["alert", "confirm", "prompt"]) define(window, name, blocker("dom", name));
  for (const name of ["write", "writeln", "open"]) define(Document.prototype, name, blocker("dom", `document.${name}`));
  // Navigation of any kind would destroy the page: refused here, never left to the browser.
  for (const name of ["pushState", "replaceState", "back", "forward", "go"]) define(History.prototype, name, blocker("dom", `history.${name}`));
  for (const name of ["innerHTML", "outerHTML"]) {
    const desc = Object.getOwnPropertyDescriptor(Element.prototype, name);
    Object.defineProperty(Element.prototype, name, {
      get: desc.get,
      set() { record(`dom:${name}`); throw new Error(`${name} is not available in the sandbox`); },
      configurable: false,
    });
  }
  define(Element.prototype, "insertAdjacentHTML", blocker("dom", "insertAdjacentHTML"));
  // location is unforgeable; the Navigation API sees every navigation it starts (href, assign,
  // replace, reload, hash) synchronously and cancels it.
  if (window.navigation) {
    window.navigation.addEventListener("navigate", (e) => { record("dom:navigation"); if (e.cancelable) e.preventDefault(); });
    for (const name of ["navigate", "reload", "back", "forward", "traverseTo"]) define(Navigation.prototype, name, blocker("dom", `navigation.${name}`));
  }

  // The originals the harness needs to read the canvas, kept before the sketch can replace them.
  const originals = Object.freeze({
    toDataURL: HTMLCanvasElement.prototype.toDataURL,
    getContext: HTMLCanvasElement.prototype.getContext,
    createElement: Document.prototype.createElement,
    drawImage: CanvasRenderingContext2D.prototype.drawImage,
    fillRect: CanvasRenderingContext2D.prototype.fillRect,
    now: realNow,
    setTimeout: window.setTimeout.bind(window),
    Promise,
    MutationObserver,
    Error,
  });
  // harness.js takes this and deletes it before any sketch runs.
  Object.defineProperty(window, "__lwPrelude", {
    value: Object.freeze({
      record, blocker, define, guardGetter, originals,
      violations: () => violations.slice(),
      isProxy: (v) => proxies.has(v),
      reseed: (s) => { mathStream.seed(s); cryptoStream.seed(s ^ 0x5bd1e995); clock = 0; },
      arm: () => { armed = true; },
    }),
    configurable: true,
  });
})();
