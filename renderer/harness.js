// The referee. Runs after p5, p5.brush and SES load and before any sketch. The pool calls, once per page,
//   __lw.run({code, seed, maxFrames, minSide, maxSide, density})
// and its promise resolves with the render report (see `finish`).
//
// The sketch cannot reach the referee. SES `lockdown()` freezes every JavaScript intrinsic, then the
// sketch is evaluated in a Compartment whose only globals are a facade of the allowed API: p5's
// functions and values, `brush`, a seeded Math, crypto and clock, a console that is kept. It has no
// window, document, timer, evaluator or DOM node. Objects handed back to it (buffers, vectors,
// colours, brush polygons, a custom tip's surface) are views through a membrane that exposes only
// their allowed members, and everything it hands to the libraries is copied to plain data, its
// functions wrapped. So a forbidden call does not exist rather than being caught; every call that
// draws comes through the facade, where it is counted or refused; and the picture on the canvas is
// painted by the allowed API only. The report is built here, out of the sketch's reach, from frozen
// built-ins; the pool checks its shape (a malformed one is the sketch's tampering).
(() => {
  "use strict";
  const P = window.__lwPrelude;
  delete window.__lwPrelude;
  const apply = Reflect.apply;
  const construct = Reflect.construct;
  const { Graphics, Framebuffer, Vector, Color, Image: P5Image, Shader } = p5;
  const BRUSH = { ...brush };
  const BRUSH_CLASSES = new Map(["Plot", "Polygon", "Position"].map((name) => [BRUSH[name], name]));
  const createCanvasEl = Document.prototype.createElement.bind(document, "canvas");
  const toDataURL = HTMLCanvasElement.prototype.toDataURL;
  const setTimeoutReal = window.setTimeout.bind(window);

  // --- the record ---------------------------------------------------------------------------
  const calls = Object.create(null);
  const count = (name) => { calls[name] = (calls[name] || 0) + 1; };
  const violations = [];
  const record = (what) => { if (violations.length < 64 && !violations.includes(what)) violations.push(what); };
  const denied = (what, message) => { record(what); throw new Error(message || `${what} is not allowed`); };

  // --- buffers: a budget in pixels, whoever allocates (the sketch, or p5.brush on its behalf) ----
  let pixelBudget = 0;  // set by run(): BUFFER_CANVASES canvases of the largest allowed size
  const BUFFER_CANVASES = 8;
  let started = false;
  let density = 1;
  let maxSide = 1024;
  const spend = (w, h, d) => {
    if (!started) return;
    const side = (v) => v === undefined || (typeof v === "number" && v > 0 && v <= maxSide);
    if (!side(w) || !side(h)) denied("canvas:buffer_size", `buffers may be at most ${maxSide} a side`);
    pixelBudget -= (w || 1) * (h || 1) * (d || density) * (d || density);
    if (pixelBudget < 0) denied("canvas:buffer_pixels", `buffers may hold at most ${BUFFER_CANVASES} canvases of pixels`);
  };
  const charge = (target, name, sides) => {
    const f = target[name];
    if (typeof f !== "function") return;
    target[name] = function (...args) { apply(spend, null, sides(this, args)); return apply(f, this, args); };
  };
  const options = (a) => (a && typeof a === "object" ? a : {});
  charge(p5.prototype, "createGraphics", (_, [w, h]) => [w, h, density]);
  charge(p5.prototype, "createImage", (_, [w, h]) => [w, h, 1]);
  charge(p5.prototype, "createFramebuffer", (self, [o]) => [options(o).width ?? self.width, options(o).height ?? self.height, density]);
  charge(Graphics.prototype, "createGraphics", (_, [w, h]) => [w, h, density]);
  charge(Graphics.prototype, "createImage", (_, [w, h]) => [w, h, 1]);
  charge(Graphics.prototype, "createFramebuffer", (self, [o]) => [options(o).width ?? self.width, options(o).height ?? self.height, density]);
  charge(P5Image.prototype, "resize", (_, [w, h]) => [w, h, 1]);
  charge(Framebuffer.prototype, "resize", (_, [w, h]) => [w, h, density]);

  // --- the membrane -------------------------------------------------------------------------
  const realOf = new WeakMap();  // view -> the library object behind it
  const viewOf = new WeakMap();  // library object -> its view
  const surfaceKind = (v) => (v instanceof Graphics || v instanceof Framebuffer ? "buffer" : v instanceof P5Image ? "image" : null);
  const dataKind = (v) => v instanceof Vector || v instanceof Color || BRUSH_CLASSES.has(v.constructor) || Object.getPrototypeOf(v) === Object.prototype;
  // Members that lead out of the drawing API: elements, contexts, renderers, the instance.
  const HIDDEN = new Set(["constructor", "elt", "canvas", "drawingContext", "renderer", "pixels", "parent", "gl", "framebuffer",
    "colorTexture", "depthTexture", "target", "prototype", "__proto__"]);
  const hidden = (key) => typeof key !== "string" || key[0] === "_" || HIDDEN.has(key);
  const MAX_COPY = 100000;

  // library -> sketch
  function toSketch(v) {
    if ((typeof v !== "object" || v === null) && typeof v !== "function") return v;
    if (typeof v === "function") return undefined;  // only methods are callable, through their view
    if (Array.isArray(v)) return v.map(toSketch);
    if (ArrayBuffer.isView(v)) return Array.from(v);
    const kind = surfaceKind(v) || (dataKind(v) ? "data" : null);
    return kind ? view(v, kind) : undefined;
  }
  function view(target, kind) {
    let v = viewOf.get(target);
    if (v) return v;
    const member = (key) => {
      if (hidden(key)) {  // reaching for what lies behind the API is the attempt to draw around it
        if (typeof key === "string" && key !== "constructor" && key !== "prototype" && key !== "__proto__") record(`raw:reach:${key}`);
        return undefined;
      }
      const value = Reflect.get(target, key);
      if (typeof value !== "function") return toSketch(value);
      return (...args) => invoke(key, value, args);
    };
    const invoke = (key, f, args) => {
      if (kind !== "data") return policed(target, key, args, f);
      const cls = BRUSH_CLASSES.get(target.constructor);
      if (cls && PAINTING_METHODS.has(key)) count(`brush.${cls}.${key}`);
      return toSketch(apply(f, target, fromSketch(args)));
    };
    v = new Proxy({}, {
      get: (_, key) => member(key),
      set: (_, key, value) => {
        if (kind !== "data" || hidden(key) || typeof Reflect.get(target, key) === "function") return false;
        return Reflect.set(target, key, fromSketch(value));
      },
      has: (_, key) => !hidden(key) && key in target,
      ownKeys: () => Reflect.ownKeys(target).filter((key) => !hidden(key)),
      getOwnPropertyDescriptor: (_, key) => {
        if (hidden(key) || !Object.prototype.hasOwnProperty.call(target, key)) return undefined;
        return { value: member(key), writable: kind === "data", enumerable: true, configurable: true };
      },
      defineProperty: () => false,
      deleteProperty: () => false,
      getPrototypeOf: () => null,
      setPrototypeOf: () => false,
      preventExtensions: () => false,
    });
    viewOf.set(target, v);
    realOf.set(v, target);
    return v;
  }

  // sketch -> library: plain data, views unwrapped, functions wrapped as the sketch's callbacks
  // (`brush`: p5.brush calls them in the middle of its own painting; `scope`: p5 runs them as a drawing scope)
  function fromSketch(args, kind = "brush") {
    let budget = MAX_COPY;
    const copy = (v, depth) => {
      if ((typeof v !== "object" || v === null) && typeof v !== "function") return v;
      if (realOf.has(v)) return realOf.get(v);
      if (typeof v === "function") return callback(v, kind);
      if (--budget < 0 || depth > 16) denied("hidden:too_large", "an argument too large or too deep to copy");
      if (Array.isArray(v)) { const out = []; for (let i = 0; i < v.length; i++) out.push(copy(v[i], depth + 1)); return out; }
      if (ArrayBuffer.isView(v)) return Array.from(v, (x) => copy(x, depth + 1));
      const out = {};
      for (const key of Object.keys(v)) out[key] = copy(v[key], depth + 1);
      return out;
    };
    return args.map((a) => copy(a, 0));
  }
  // A sketch function the libraries call (a custom tip, a vector field, a framebuffer's draw scope):
  // it sees views of what it is given; a custom tip's first argument is its own surface.
  let tipSurface = null;
  let inBrush = 0;  // sketch callbacks of p5.brush running: they may shape a tip, never paint
  const callback = (fn, kind) => function (...args) {
    if (finished) throw new Error("the sketch's time is over");
    const before = tipSurface;
    if (kind === "brush" && args[0] instanceof Graphics) tipSurface = args[0];
    if (kind === "brush") inBrush++;
    try {
      return fromSketch([apply(fn, undefined, args.map(toSketch))], kind)[0];
    } finally {
      tipSurface = before;
      if (kind === "brush") inBrush--;
    }
  };

  // --- the rules of p5's API ------------------------------------------------------------------
  // Shapes from the sketch are bare primitives, except a custom brush tip's on its own surface (how
  // p5.brush defines a stamp). Text, images that are not buffers, pixel writes, shaders, loading,
  // saving and the DOM are violations.
  const PRIMITIVES = new Set(["arc", "bezier", "box", "circle", "cone", "curve", "cylinder", "ellipse", "ellipsoid", "line",
    "plane", "point", "quad", "rect", "sphere", "spline", "square", "torus", "triangle", "beginShape", "endShape", "vertex",
    "bezierVertex", "splineVertex", "quadraticVertex", "curveVertex", "beginContour", "endContour", "model"]);
  const TEXT = /^(text\w*|loadFont)$/;
  const IMAGES = new Set(["image", "texture", "background", "copy", "blend", "imageLight", "panorama"]);
  const PIXELS = new Set(["updatePixels", "set", "loadPixels"]);
  const SHADERS = /^(create(Filter)?Shader|shader|strokeShader|imageShader|resetShader|base\w*Shader|build\w*Shader|load\w*Shader)$/;
  const LOADS = /^(load|save|http)/;
  const DOM = /^(create(Img|Video|Audio|Capture|Element|Div|P|Span|A|Slider|Button|Checkbox|Select|Radio|ColorPicker|Input|FileInput|Writer)|select|selectAll|removeElements|getURL\w*|describe\w*|gridOutput|textOutput)$/;
  const CANVAS = new Set(["resizeCanvas", "noCanvas", "createCanvas"]);  // and remove(), of the sketch itself
  const isBuffer = (v) => v instanceof Graphics || v instanceof Framebuffer;
  const isImage = (v) => isBuffer(v) || v instanceof P5Image;
  const policed = (self, name, args, f) => {
    if (finished) throw new Error("the sketch's time is over");
    const real = fromSketch(args, "scope");
    const paints = PRIMITIVES.has(name) || IMAGES.has(name) || PIXELS.has(name) || name === "filter" || name === "clear";
    if (inBrush && paints && self !== tipSurface) denied(`raw:callback:${name}`, `${name}() cannot draw from inside a p5.brush callback`);
    if (name === "createFramebuffer" && real[0] && typeof real[0] === "object") real[0].density = density;  // the pool's, like the canvas
    if (self === tipSurface && (PRIMITIVES.has(name))) count(`tip.${name}`);
    else if (PRIMITIVES.has(name)) count(`p5.${name}`);
    else if (TEXT.test(name)) denied(`text:${name}`, "text() is not allowed");
    else if (LOADS.test(name) && name !== "loadPixels") denied(`load:${name}`, `${name}() is not available in the sandbox`);
    else if (DOM.test(name)) denied(`dom:${name}`, `${name}() is not available in the sandbox`);
    else if (SHADERS.test(name)) denied(`raw:${name}`, `${name}(): the sketch may not run its own shaders`);
    else if (name === "filter" && real.some((a) => a instanceof Shader)) denied("raw:filter", "filter() with a shader");
    else if (PIXELS.has(name) && !(name === "set" && real.length < 3) && name !== "loadPixels") denied(`raw:${name}`, `${name}() writes pixels`);
    else if (IMAGES.has(name) && real.some((a) => isImage(a) && !isBuffer(a))) denied(`raw:${name}`, `${name}() draws an image`);
    else if (CANVAS.has(name) || (name === "remove" && self === instance)) denied(`canvas:${name}`, `${name}() is not allowed`);
    else if (name === "pixelDensity") return apply(f, self, []);  // the pool's density; a sketch cannot change it
    return toSketch(apply(f, self, real));
  };

  // --- the facade: the sketch's only globals --------------------------------------------------
  let instance = null;
  let made = null;  // {width, height, pixelWidth, pixelHeight} of the sketch's canvas
  let minSide = 256;
  const globals = Object.create(null);
  const createCanvas = (w, h, renderer) => {
    if (finished) throw new Error("the sketch's time is over");
    if (made) denied("canvas:createCanvas_repeated", "createCanvas may be called once");
    const side = (v) => typeof v === "number" && Number.isFinite(v) && v >= minSide && v <= maxSide;
    if (!side(w) || !side(h)) denied("canvas:size", `each side of the canvas must be within ${minSide}-${maxSide}`);
    if (renderer !== p5.prototype.WEBGL) record("canvas:not_webgl");
    instance.createCanvas(w, h, renderer === p5.prototype.WEBGL ? renderer : undefined);
    instance.pixelDensity(density);
    made = { width: instance.width, height: instance.height, pixelWidth: instance.canvas.width, pixelHeight: instance.canvas.height };
    return undefined;
  };
  const names = new Set();
  for (let proto = p5.prototype; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const name of Object.getOwnPropertyNames(proto)) if (!hidden(name)) names.add(name);
  }
  for (const name of ["width", "height", "frameCount", "deltaTime", "mouseX", "mouseY", "pmouseX", "pmouseY", "mouseIsPressed",
    "key", "keyCode", "keyIsPressed", "windowWidth", "windowHeight", "displayWidth", "displayHeight", "focused"]) names.add(name);
  for (const name of names) {
    const d = Object.getOwnPropertyDescriptor(p5.prototype, name);
    if (d && typeof d.value === "function") {
      globals[name] = name === "createCanvas" ? createCanvas : function (...args) {
        if (!instance) throw new ReferenceError(`${name}() is not available before setup()`);
        return policed(instance, name, args, instance[name]);
      };
    } else if (/^[A-Z][A-Z0-9_]*$/.test(name) && d && !d.get && (typeof d.value !== "object" || d.value === null)) {
      globals[name] = d.value;  // p5's constants: PI, WEBGL, BLUR, ...
    } else {
      Object.defineProperty(globals, name, { get: () => (instance ? toSketch(instance[name]) : undefined), enumerable: true });
    }
  }
  const PAINTING = new Set(["arc", "circle", "endShape", "endStroke", "flowLine", "hatchArray", "line", "polygon", "rect", "spline", "massArray"]);
  const PAINTING_METHODS = new Set(["draw", "fill", "hatch", "wash", "mass", "show"]);
  const brushFacade = Object.create(null);
  for (const [name, f] of Object.entries(BRUSH)) {
    if (typeof f !== "function" || name === "instance") continue;
    if (BRUSH_CLASSES.has(f)) {
      brushFacade[name] = function (...args) {
        if (!new.target) throw new TypeError(`brush.${name} is a class`);
        return view(construct(f, fromSketch(args)), "data");
      };
    } else {
      brushFacade[name] = (...args) => {
        if (finished) throw new Error("the sketch's time is over");
        if (inBrush && PAINTING.has(name)) denied(`raw:callback:brush.${name}`, `brush.${name} cannot paint from inside a p5.brush callback`);
        count(`brush.${name}`);
        return toSketch(apply(f, BRUSH, fromSketch(args)));
      };
    }
  }
  globals.brush = Object.freeze(brushFacade);
  const VectorFacade = function (...args) { return view(construct(Vector, fromSketch(args)), "data"); };
  for (const name of Object.getOwnPropertyNames(Vector)) {
    if (typeof Vector[name] === "function" && !hidden(name)) VectorFacade[name] = (...args) => toSketch(apply(Vector[name], Vector, fromSketch(args)));
  }
  globals.p5 = Object.freeze({ Vector: Object.freeze(VectorFacade) });
  // A seeded Math, crypto and clock (prelude.js) instead of the page's.
  const SeededMath = Object.create(null);
  for (const key of Object.getOwnPropertyNames(Math)) SeededMath[key] = Math[key];
  SeededMath.random = P.random;
  globals.Math = Object.freeze(SeededMath);
  const RealDate = Date;
  const VirtualDate = function Date(...args) {
    const t = P.EPOCH + Math.floor(P.now());
    if (!new.target) return new RealDate(t).toString();
    return construct(RealDate, args.length ? args : [t]);
  };
  VirtualDate.prototype = RealDate.prototype;
  VirtualDate.now = () => P.EPOCH + Math.floor(P.now());
  VirtualDate.parse = RealDate.parse;
  VirtualDate.UTC = RealDate.UTC;
  globals.Date = Object.freeze(VirtualDate);
  globals.performance = Object.freeze({ now: P.now });
  const getRandomValues = (array) => {
    if (!ArrayBuffer.isView(array) || array instanceof Float32Array || array instanceof Float64Array) throw new TypeError("getRandomValues needs an integer typed array");
    const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
    for (let i = 0; i < bytes.length; i++) bytes[i] = P.randomByte();
    return array;
  };
  globals.crypto = Object.freeze({
    getRandomValues,
    randomUUID: () => {
      const b = getRandomValues(new Uint8Array(16));
      b[6] = (b[6] & 0x0f) | 0x40;
      b[8] = (b[8] & 0x3f) | 0x80;
      const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    },
  });
  // Console: kept in the report, capped, never forwarded.
  const consoleLines = [];
  let consoleDropped = 0;
  const sketchConsole = Object.create(null);
  for (const level of ["log", "info", "warn", "error", "debug", "trace"]) {
    sketchConsole[level] = (...args) => {
      if (consoleLines.length >= 50) { consoleDropped++; return; }
      let text;
      try { text = args.map((a) => (typeof a === "string" ? a : String(a))).join(" "); } catch (e) { text = "<unprintable>"; }
      consoleLines.push(`${level}: ${text.slice(0, 300)}`);
    };
  }
  globals.console = Object.freeze(sketchConsole);
  // Names of the page a sketch may reach for: there is nothing behind them, and the attempt is its reason.
  const absent = (kind, list) => {
    for (const name of list.split(" ")) {
      Object.defineProperty(globals, name, { get: () => denied(`${kind}:${name}`, `${name} is not available in the sandbox`), enumerable: false });
    }
  };
  absent("network", "fetch XMLHttpRequest WebSocket EventSource RTCPeerConnection webkitRTCPeerConnection RTCDataChannel " +
    "Worker SharedWorker WebTransport BroadcastChannel importScripts sendBeacon");
  absent("dom", "window self top parent frames opener document location navigator history screen visualViewport " +
    "localStorage sessionStorage indexedDB caches cookieStore alert confirm prompt open setTimeout setInterval " +
    "requestAnimationFrame queueMicrotask MessageChannel postMessage addEventListener structuredClone");
  absent("hidden", "Proxy");
  absent("load", "Image createImageBitmap ImageDecoder Blob File FileReader URL OffscreenCanvas ImageData");
  absent("eval", "eval Function WebAssembly");
  absent("raw", "drawingContext pixels");

  // --- the run ------------------------------------------------------------------------------
  let finished = false;
  let frames = 0;
  let maxFrames = 5;
  let t0 = 0;
  let js_ms = 0;
  let firstError = null;
  let resolveRun = null;
  // What the sketch threw, described without trusting it (a name or message may be a getter of its own).
  const describe = (err) => {
    if (typeof err === "string") return err.startsWith("Uncaught") ? err : `Uncaught ${err}`;
    try {
      const name = err.name, message = err.message;
      if (err instanceof Error && typeof name === "string" && typeof message === "string") return `${name}: ${message}`;
    } catch (e) { /* a getter that throws */ }
    return "Uncaught non-Error value";
  };
  const INERT = "Function.prototype.constructor is not a valid constructor.";  // SES's answer to new (f.constructor)(code)
  const fail = (err) => {
    if (firstError === null) firstError = describe(err).slice(0, 500);
    if (firstError.endsWith(INERT)) record("eval:constructor");
    finish();
  };
  window.addEventListener("error", (e) => { if (e instanceof ErrorEvent) fail(e.error ?? e.message); }, true);
  window.addEventListener("unhandledrejection", (e) => fail(e.reason));

  // p5.brush flushes its buffered paint in its postsetup/postdraw hooks; ours run after it, so at
  // that point the frame is on the canvas. Animated sketches stop after maxFrames.
  const finishSoon = () => setTimeoutReal(finish, 0);  // p5 finishes the frame's bookkeeping first
  p5.registerAddon((_p5, _fn, lifecycles) => {
    lifecycles.postsetup = function () { if (!hooks.draw) finishSoon(); };
    lifecycles.postdraw = function () {
      frames++;
      if (!this.isLooping() || frames >= maxFrames) { this.noLoop(); finishSoon(); }
    };
  });
  let hooks = {};

  function capture() {
    const canvas = instance && instance.canvas;
    if (!canvas) return { png: null, width: 0, height: 0 };
    const out = createCanvasEl();
    out.width = canvas.width;
    out.height = canvas.height;
    const ctx = out.getContext("2d");
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.drawImage(canvas, 0, 0);
    const png = toDataURL.call(out, "image/png");
    // The first read of the WebGL canvas waits for SwiftShader to rasterise everything the
    // sketch queued (often most of its painting time), so the sketch's time ends here.
    js_ms = P.realNow() - t0;
    return { png, width: canvas.width, height: canvas.height };
  }

  function finish() {
    if (finished || !started) return;
    finished = true;
    js_ms = P.realNow() - t0;  // refined in capture()
    try { instance && instance.noLoop(); } catch (e) { /* p5 failed to start */ }
    let shot = { png: null, width: 0, height: 0 };
    try { shot = capture(); } catch (e) { if (firstError === null) firstError = `capture failed: ${describe(e)}`; }
    if (made && shot.png && (shot.width !== made.pixelWidth || shot.height !== made.pixelHeight ||
        instance.width !== made.width || instance.height !== made.height)) record("canvas:resized");
    if (!made && firstError === null) record("canvas:no_createCanvas");
    resolveRun({
      error: firstError,
      console: consoleDropped ? [...consoleLines, `(${consoleDropped} more console lines dropped)`] : [...consoleLines],
      calls: { ...calls },
      violations: [...violations],
      js_ms,
      png: shot.png,
      width: made ? made.width : 0,
      height: made ? made.height : 0,
    });
  }

  lockdown({ errorTaming: "unsafe", consoleTaming: "unsafe", overrideTaming: "severe", stackFiltering: "verbose", reporting: "none" });

  function run(opts) {
    if (started) throw new Error("one sketch per page");
    const { code, seed, maxFrames: frameLimit = 5, minSide: lo = 256, maxSide: hi = 1024, density: d = 1 } = opts;
    if (typeof code !== "string") throw new Error("run({code, seed, ...}): code must be a string");
    started = true;
    maxFrames = frameLimit;
    minSide = lo;
    maxSide = hi;
    density = d;
    pixelBudget = BUFFER_CANVASES * hi * hi * d * d;
    P.reseed(seed);
    BRUSH.seed(seed);
    BRUSH.noiseSeed(seed);
    const done = new Promise((resolve) => { resolveRun = resolve; });
    setTimeoutReal(() => {
      t0 = P.realNow();
      const compartment = new Compartment({ __options__: true });
      Object.defineProperties(compartment.globalThis, Object.getOwnPropertyDescriptors(globals));
      try {
        // The sketch's top level runs here; it names its entry points for p5 to call.
        // (`i-->0` is JavaScript, not an HTML comment: SES is told to read it so)
        hooks = compartment.evaluate(`${code}\n;({ setup: typeof setup === "function" ? setup : undefined, draw: typeof draw === "function" ? draw : undefined })`,
          { __evadeHtmlCommentTest__: true });
      } catch (e) {
        fail(e);
        return;
      }
      if (finished) return;
      const { setup, draw } = hooks;
      if (typeof setup !== "function" && typeof draw !== "function") {
        fail(new Error("the sketch defines neither setup() nor draw()"));
        return;
      }
      // `this` in setup() and draw() is the sketch's global object, as in p5's global mode
      const entry = (fn) => fn && (() => (finished ? undefined : apply(fn, compartment.globalThis, [])));
      instance = new p5((p) => {
        if (setup) p.setup = entry(setup);
        if (draw) p.draw = entry(draw);
      });
    }, 0);
    return done;
  }

  Object.defineProperty(window, "__lw", { value: Object.freeze({ run, ready: true }), writable: false, configurable: false });
})();
