// Runs after p5 and p5.brush load and before the sketch. It counts the drawing calls the
// sketch makes, blocks what the gate forbids, detects when p5.brush has finished painting
// and hands the canvas back. The pool calls `__lw.run(code, seed, maxFrames, size, density)` once
// per page; its promise resolves with the render report.
(() => {
  "use strict";
  const P = window.__lwPrelude;
  delete window.__lwPrelude;
  const { record, originals: O } = P;

  const calls = Object.create(null);
  const count = (name) => { calls[name] = (calls[name] || 0) + 1; };
  // depth > 0 while p5 or p5.brush runs on the sketch's behalf: their internal calls are not
  // the sketch's, so only the outermost call is counted or policed.
  let depth = 0;
  const wrap = (f, onCall) => function wrapped(...args) {
    if (depth === 0) onCall(args);
    depth++;
    try {
      return new.target ? Reflect.construct(f, args, new.target) : f.apply(this, args);
    } finally {
      depth--;
    }
  };

  // brush.*: count every method; freeze the object so a sketch cannot swap them out.
  for (const name of Object.keys(brush)) {
    if (typeof brush[name] === "function" && /^[a-z]/.test(name)) brush[name] = wrap(brush[name], () => count(`brush.${name}`));
  }
  Object.freeze(brush);
  Object.defineProperty(window, "brush", { value: brush, writable: false, configurable: false });

  // Bare p5 drawing functions: counted (the gate rejects painting that dodges the medium).
  const proto = p5.prototype;
  const PRIMITIVES = ["arc", "bezier", "box", "circle", "cone", "curve", "cylinder", "ellipse", "ellipsoid",
    "image", "line", "plane", "point", "quad", "rect", "sphere", "spline", "square", "torus", "triangle",
    "beginShape", "endShape", "vertex", "bezierVertex", "splineVertex", "quadraticVertex", "beginContour",
    "endContour", "model"];
  for (const name of PRIMITIVES) {
    if (typeof proto[name] === "function") proto[name] = wrap(proto[name], () => count(`p5.${name}`));
  }
  // text() is a cheat even though WEBGL without a font draws nothing: record it.
  const textImpl = proto.text;
  proto.text = wrap(textImpl, () => record("text:text"));
  // Loading, saving and DOM creation: blocked and recorded.
  const forbid = (kind, name, impl) => function forbidden(...args) {
    if (started && depth === 0) { record(`${kind}:${name}`); throw new Error(`${name}() is not available in the sandbox`); }
    return impl.apply(this, args);
  };
  const forbidden = [];
  const DOM_MAKERS = /^(create(Img|Video|Audio|Capture|Element|Div|P|Span|A|Slider|Button|Checkbox|Select|Radio|ColorPicker|Input|FileInput|Writer)|select|selectAll|removeElements)$/;
  for (const name of Object.getOwnPropertyNames(proto)) {
    if (typeof proto[name] !== "function") continue;
    if (/^(load|save|http)/.test(name) && name !== "loadPixels") proto[name] = forbid("load", name, proto[name]);
    else if (DOM_MAKERS.test(name)) proto[name] = forbid("dom", name, proto[name]);
    else continue;
    forbidden.push(name);
  }
  // The canvas: exactly one createCanvas(size, size, WEBGL) from the sketch, never resized.
  let userCanvases = 0;
  let expectedSize = 512;
  let ownDefaultCanvas = false;  // true while p5 makes its default 100x100 canvas before setup
  const createCanvas = proto.createCanvas;
  proto.createCanvas = function (w, h, renderer, ...rest) {
    const internal = depth > 0 || (!started);
    if (!internal && !ownDefaultCanvas) {
      userCanvases++;
      if (userCanvases > 1) { record("canvas:createCanvas_repeated"); throw new Error("createCanvas may be called once"); }
      if (w !== expectedSize || h !== expectedSize) { record("canvas:size"); throw new Error(`the canvas must be ${expectedSize}x${expectedSize}`); }
      if (renderer !== "webgl") record("canvas:not_webgl");
    }
    ownDefaultCanvas = false;
    depth++;
    try {
      const made = createCanvas.call(this, w, h, renderer, ...rest);
      if (!internal) pixelDensity.call(this, density);
      return made;
    } finally { depth--; }
  };
  for (const name of ["resizeCanvas", "noCanvas", "remove"]) proto[name] = forbid("canvas", name, proto[name]);
  // The pool's density (1 unless it asks for fewer pixels: a 512 sketch painted at 0.5 is a
  // 256x256 image, a cheaper render); a sketch cannot change it.
  let density = 1;
  const pixelDensity = proto.pixelDensity;
  proto.pixelDensity = function (d) { return d === undefined ? pixelDensity.call(this) : pixelDensity.call(this, density); };
  // The DOM outside the canvas: creating elements from the sketch is a violation.
  const createElement = O.createElement;
  Document.prototype.createElement = function (tag, ...rest) {
    if (started && depth === 0) { record(`dom:createElement`); throw new Error("createElement is not available in the sandbox"); }
    return createElement.call(this, tag, ...rest);
  };

  // Console: kept in the report, capped, never forwarded (a flood would swamp the pool).
  const consoleLines = [];
  let consoleDropped = 0;
  for (const level of ["log", "info", "warn", "error", "debug", "trace"]) {
    console[level] = (...args) => {
      if (consoleLines.length >= 50) { consoleDropped++; return; }
      let text;
      try { text = args.map((a) => (typeof a === "string" ? a : String(a))).join(" "); } catch (e) { text = "<unprintable>"; }
      consoleLines.push(`${level}: ${text.slice(0, 300)}`);
    };
  }

  const seal = (obj, names) => {
    for (const name of names) if (name in obj) Object.defineProperty(obj, name, { value: obj[name], writable: false, configurable: false });
  };
  // The wrappers stay in place: p5 copies prototype functions onto window at `new p5()`,
  // so a sketch that swapped one here would paint uncounted.
  seal(proto, [...PRIMITIVES, "text", "createCanvas", "resizeCanvas", "noCanvas", "remove", "pixelDensity",
    ...forbidden]);
  seal(Document.prototype, ["createElement"]);
  // A sketch that makes every object thenable could answer for the harness; the built-in
  // prototypes are frozen once the libraries have loaded.
  for (const ctor of [Object, Array, Function, Promise, String, Number, Boolean, Symbol, Error, RegExp, Map, Set, JSON, Reflect]) {
    Object.freeze(ctor.prototype || ctor);
  }

  // Everything p5.brush does in its own lifecycle hooks (the composite flush) is library work.
  for (const name of Object.keys(p5.lifecycleHooks)) {
    p5.lifecycleHooks[name] = p5.lifecycleHooks[name].map((hook) => function (...args) {
      depth++;
      try { return hook.apply(this, args); } finally { depth--; }
    });
  }

  let started = false;
  let finished = false;
  let frames = 0;
  let maxFrames = 5;
  let t0 = 0;
  let js_ms = 0;
  let instance = null;
  let firstError = null;
  let resolveRun = null;

  const describe = (err) => {
    if (err instanceof Error) return `${err.name}: ${err.message}`;
    if (typeof err === "string") return err.startsWith("Uncaught") ? err : `Uncaught ${err}`;
    try { return `Uncaught ${JSON.stringify(err)}`; } catch (e) { return "Uncaught non-Error value"; }
  };
  const fail = (err) => {
    if (firstError === null) firstError = describe(err).slice(0, 500);
    finish();
  };
  window.addEventListener("error", (e) => { if (e instanceof ErrorEvent) fail(e.error ?? e.message); }, true);
  window.addEventListener("unhandledrejection", (e) => fail(e.reason));
  // CSP has no 'unsafe-eval': eval, new Function and string timers are refused and land here.
  document.addEventListener("securitypolicyviolation", (e) => record(e.blockedURI === "eval" ? "eval:csp" : `network:csp:${e.violatedDirective}`));

  // Mutations of the page other than p5's canvases are DOM tampering.
  const ownNodes = new WeakSet();
  const isCanvas = (n) => n instanceof HTMLCanvasElement;
  const inspect = (list) => {
    for (const m of list) {
      if (m.type === "childList") {
        for (const n of [...m.addedNodes, ...m.removedNodes]) if (!isCanvas(n) && !ownNodes.has(n)) record(`dom:mutation:${n.nodeName}`);
      } else if (m.type === "characterData" || !isCanvas(m.target)) {
        record(`dom:mutation:${m.target.nodeName}`);
      }
    }
  };
  const observer = new O.MutationObserver(inspect);

  // p5.brush flushes its buffered paint in its postsetup/postdraw hooks; ours run after it,
  // so at that point the frame is on the canvas. Animated sketches stop after maxFrames.
  p5.registerAddon((_p5, _fn, lifecycles) => {
    lifecycles.presetup = function () {
      ownDefaultCanvas = true;
      // p5 shows a spinner while setup() runs (its own presetup hook, before this one).
      if (this._loadingIndicator) ownNodes.add(this._loadingIndicator);
      const spinnerStyle = document.getElementById("p5-loading-style");
      if (spinnerStyle) ownNodes.add(spinnerStyle);
    };
    lifecycles.postsetup = function () { if (typeof window.draw !== "function") finishSoon(); };
    lifecycles.postdraw = function () {
      frames++;
      if (!this.isLooping() || frames >= maxFrames) { this.noLoop(); finishSoon(); }
    };
  });
  // Yield once so p5 finishes the frame's bookkeeping before the capture.
  const finishSoon = () => O.setTimeout(finish, 0);

  function capture() {
    const canvas = instance && instance.canvas;
    if (!canvas) return { png: null, width: 0, height: 0 };
    if (!canvas.isConnected) record("canvas:removed");
    const out = createElement.call(document, "canvas");
    out.width = canvas.width;
    out.height = canvas.height;
    const ctx = O.getContext.call(out, "2d");
    ctx.fillStyle = "#ffffff";
    O.fillRect.call(ctx, 0, 0, out.width, out.height);
    O.drawImage.call(ctx, canvas, 0, 0);
    const png = O.toDataURL.call(out, "image/png");
    // The first read of the WebGL canvas waits for SwiftShader to rasterise everything the
    // sketch queued (often most of its painting time), so the sketch's time ends here.
    js_ms = O.now() - t0;
    return { png, width: canvas.width, height: canvas.height };
  }

  function finish() {
    if (finished || !started) return;
    finished = true;
    js_ms = O.now() - t0;  // refined in capture()
    try { instance && instance.noLoop(); } catch (e) { /* the sketch broke noLoop */ }
    inspect(observer.takeRecords());
    observer.disconnect();
    let shot = { png: null, width: 0, height: 0 };
    try { shot = capture(); } catch (e) { if (firstError === null) firstError = `capture failed: ${describe(e)}`; }
    const pixels = Math.round(expectedSize * density);
    if (shot.png && (shot.width !== pixels || shot.height !== pixels)) record("canvas:size");
    if (userCanvases === 0 && firstError === null) record("canvas:no_createCanvas");
    resolveRun({
      error: firstError,
      console: consoleDropped ? [...consoleLines, `(${consoleDropped} more console lines dropped)`] : consoleLines,
      calls: { ...calls },
      violations: P.violations(),
      js_ms,
      frames,
      png: shot.png,
    });
  }

  function run(code, seed, frameLimit, size, pixelsPerUnit) {
    if (started) throw new Error("one sketch per page");
    started = true;
    maxFrames = frameLimit;
    expectedSize = size;
    density = pixelsPerUnit;
    P.define(window, "eval", P.blocker("eval", "eval"));  // not before: Playwright's evaluate uses it
    P.reseed(seed);
    depth++;
    try { brush.seed(seed); brush.noiseSeed(seed); } finally { depth--; }
    P.arm();
    const done = new O.Promise((resolve) => { resolveRun = resolve; });
    O.setTimeout(() => {
      t0 = O.now();
      observer.observe(document.documentElement, { subtree: true, childList: true, attributes: true, characterData: true });
      const script = createElement.call(document, "script");
      ownNodes.add(script);
      script.textContent = code;
      document.body.appendChild(script);  // a SyntaxError or a top-level throw fires "error" here
      if (finished) return;
      if (typeof window.setup !== "function" && typeof window.draw !== "function") {
        fail(new Error("the sketch defines neither setup() nor draw()"));
        return;
      }
      instance = new p5();  // global mode: binds p5's (wrapped) functions onto window
    }, 0);
    return done;
  }

  Object.defineProperty(window, "__lw", { value: Object.freeze({ run, ready: true }), writable: false, configurable: false });
})();
