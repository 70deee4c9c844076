// Runs after p5 and p5.brush load and before the sketch. It tells the sketch's drawing from the
// libraries', counts and polices it on every path, blocks what the gate forbids, detects when
// p5.brush has finished painting and hands the canvas back. The pool calls, once per page,
//   __lw.run({code, seed, maxFrames, minSide, maxSide, density})
// and its promise resolves with the render report (see `finish`).
//
// Who is drawing. `control` is a stack: LIB while p5 or p5.brush runs on the sketch's behalf
// (every p5 and brush entry point is wrapped), a callback record while a sketch function that
// the libraries called runs (setup/draw and the other globals the sketch defines, functions it
// hands to p5 or p5.brush: custom brush tips, vector fields, pressure curves, ...). When the
// stack is empty the event loop called in directly (the sketch's own top level, its timers, or
// p5 resuming after an await), and the innermost stack frame that is not the harness's says
// whose code it is. Calls made by p5.brush or p5 are theirs; calls made by sketch code,
// including sketch code that p5.brush calls back, are the sketch's.
(() => {
  "use strict";
  const P = window.__lwPrelude;
  delete window.__lwPrelude;
  const { record, originals: O } = P;
  const apply = Reflect.apply;
  const construct = Reflect.construct;
  const ownKeys = Reflect.ownKeys;
  const getDescriptor = Object.getOwnPropertyDescriptor;
  const getProto = Object.getPrototypeOf;

  const calls = Object.create(null);
  const count = (name) => { calls[name] = (calls[name] || 0) + 1; };

  const LIB = 0;
  const control = [];
  const TOP = Object.freeze({ kind: "sketch", surface: null });  // the sketch's own code, no callback
  const ORIGIN = location.origin;
  const LIBRARY_URLS = new Set([`${ORIGIN}/p5.min.js`, `${ORIGIN}/p5.brush.js`]);
  const HARNESS_URLS = new Set([`${ORIGIN}/harness.js`, `${ORIGIN}/prelude.js`]);
  const FRAME_URL = /\(([^()]*):\d+:\d+\)$|^\s*at ([^()\s]*):\d+:\d+$/;
  // The innermost frame that is neither the harness nor a builtin decides; no such frame (a
  // native function handed straight to a timer) is the sketch's.
  const sketchOnStack = () => {
    const lines = new O.Error().stack.split("\n");
    for (let i = 1; i < lines.length; i++) {
      const m = FRAME_URL.exec(lines[i]);
      const url = m && (m[1] || m[2]);
      if (!url || url === "native" || url.startsWith("<anonymous>")) continue;
      if (HARNESS_URLS.has(url)) { if (lines[i].includes(" __lwSketchCallback ")) return true; continue; }
      return !LIBRARY_URLS.has(url);
    }
    return true;
  };
  // The sketch's callback record (TOP outside callbacks) when the sketch is the caller, else
  // null. `precise`: unless a library call is in progress, read the stack trace too (raw
  // contexts and renderer internals, which p5 reaches from functions that are not wrapped, or
  // after an await); p5's public API is the sketch's unless a library call is in progress.
  const caller = (precise) => {
    if (!started) return null;
    const top = control.length ? control[control.length - 1] : TOP;
    if (top === LIB) return null;
    return !precise || sketchOnStack() ? top : null;
  };
  const asLibrary = (f, self, args, newTarget) => {
    control.push(LIB);
    try {
      return newTarget ? construct(f, args, newTarget) : apply(f, self, args);
    } finally {
      control.pop();
    }
  };
  // A sketch function that the libraries call runs as the sketch's code.
  const asSketch = (fn, kind) => function __lwSketchCallback(...args) {
    control.push({ kind, surface: kind === "tip" ? args[0] : null });
    try {
      return new.target ? construct(fn, args, new.target) : apply(fn, this, args);
    } finally {
      control.pop();
    }
  };
  const denied = (what, message) => { record(what); throw new Error(message || `${what} is not allowed`); };

  // Arguments handed to p5.brush must be plain data: a getter, a valueOf/toString/toPrimitive of
  // the sketch's own or a Proxy would run sketch code inside p5.brush, unseen.
  const trusted = new WeakSet([Object.prototype, Array.prototype, Function.prototype]);
  const trustChain = (proto) => { for (let p = proto; p && !trusted.has(p); p = getProto(p)) trusted.add(p); };
  for (const ctor of [Number, String, Boolean, Date, Map, Set, Float32Array, Float64Array, Int8Array, Int16Array,
    Int32Array, Uint8Array, Uint8ClampedArray, Uint16Array, Uint32Array, ArrayBuffer]) trustChain(ctor.prototype);
  const COERCERS = new Set(["valueOf", "toString", "toJSON", Symbol.toPrimitive, Symbol.iterator]);
  const plainValues = (args) => {
    for (let i = 0; i < args.length; i++) { const a = args[i]; if ((typeof a === "object" && a !== null) || typeof a === "function") return false; }
    return true;
  };
  const hiddenCode = (args) => {
    if (plainValues(args)) return null;
    const seen = new Set();
    const todo = [...args];
    let budget = 100000;
    while (todo.length) {
      const v = todo.pop();
      if ((typeof v !== "object" || v === null) && typeof v !== "function") continue;
      if (seen.has(v)) continue;
      seen.add(v);
      if (P.isProxy(v)) return "a Proxy";
      if (--budget < 0) return "too large an argument";
      const proto = getProto(v);
      const plain = proto === Object.prototype || proto === Array.prototype || proto === null;
      for (let holder = v; holder && (holder === v || !trusted.has(holder)); holder = getProto(holder)) {
        if (P.isProxy(holder)) return "a Proxy";
        const keys = ownKeys(holder);
        budget -= keys.length;
        if (budget < 0) return "too large an argument";
        for (const key of keys) {
          const d = getDescriptor(holder, key);
          if (d.get || d.set) return `a getter (${String(key)})`;
          if (COERCERS.has(key) && !(Array.isArray(holder) && key === Symbol.iterator && d.value === Array.prototype[Symbol.iterator])) return `its own ${String(key)}`;
          if (holder === v && (plain || !trusted.has(proto)) && typeof v !== "function") todo.push(d.value);
        }
      }
    }
    return null;
  };
  // Function arguments (and functions in option objects) become sketch callbacks.
  const markCallbacks = (args, kind) => plainValues(args) ? args : args.map((a) => {
    if (typeof a === "function") return asSketch(a, kind);
    if (a && typeof a === "object" && getProto(a) === Object.prototype && !P.isProxy(a)) {
      let copy = null;
      for (const key of Object.keys(a)) {
        if (typeof a[key] === "function") {
          copy = copy || { ...a };
          copy[key] = asSketch(a[key], key === "tip" && a.type === "custom" ? "tip" : kind);
        }
      }
      return copy || a;
    }
    return a;
  });

  // brush.*: counted, arguments checked, callbacks marked; the object is frozen.
  const brushCall = (label, who, args) => {
    if (who.kind !== "sketch") denied(`raw:callback:${label}`, `${label} cannot be called from inside a p5.brush callback`);
    const why = hiddenCode(args);
    if (why) denied(`hidden:${label}`, `${label} was given ${why}`);
    count(label);
    return markCallbacks(args, "brush");
  };
  const wrapBrush = (f, label) => {
    const wrapped = function (...args) {
      const who = caller(false);
      return asLibrary(f, this, who ? brushCall(label, who, args) : args, new.target);
    };
    if (f.prototype) wrapped.prototype = f.prototype;  // classes: instanceof and subclasses still work
    return wrapped;
  };
  const PAINTING_METHODS = new Set(["draw", "fill", "hatch", "wash", "mass", "show"]);  // the rest build geometry
  for (const name of Object.keys(brush)) {
    const value = brush[name];
    if (typeof value !== "function") continue;
    if (/^[A-Z]/.test(name) && value.prototype) {  // Polygon, Plot, Position: their methods paint too
      trustChain(value.prototype);
      for (const method of Object.getOwnPropertyNames(value.prototype)) {
        if (PAINTING_METHODS.has(method) && typeof value.prototype[method] === "function") {
          value.prototype[method] = wrapBrush(value.prototype[method], `brush.${name}.${method}`);
        }
      }
      Object.freeze(value.prototype);
    }
    brush[name] = wrapBrush(value, `brush.${name}`);
  }
  Object.freeze(brush);
  Object.defineProperty(window, "brush", { value: brush, writable: false, configurable: false });

  // p5's API. Shapes from the sketch are counted as bare primitives, except a custom brush tip's
  // shapes on its own tip surface (how p5.brush defines a stamp). Text, images that are not
  // p5.brush buffers, pixel writes, shaders and filters with shaders are violations from any sketch
  // code; from inside a p5.brush callback, any drawing but the tip's shapes is.
  const PRIMITIVES = ["arc", "bezier", "box", "circle", "cone", "curve", "cylinder", "ellipse", "ellipsoid",
    "line", "plane", "point", "quad", "rect", "sphere", "spline", "square", "torus", "triangle",
    "beginShape", "endShape", "vertex", "bezierVertex", "splineVertex", "quadraticVertex", "beginContour",
    "endContour", "model", "normal", "fill", "stroke", "noFill", "noStroke", "strokeWeight"];
  const SHAPES = new Set(PRIMITIVES);
  const STYLE = new Set(["normal", "fill", "stroke", "noFill", "noStroke", "strokeWeight"]);
  const TEXT = new Set(["text", "textToPoints", "textToContours", "textToModel"]);
  const IMAGES = new Set(["image", "texture", "background", "set", "copy", "blend", "imageLight", "panorama"]);
  const PIXELS = new Set(["updatePixels", "set"]);
  const SHADERS = new Set(["createShader", "createFilterShader", "shader", "strokeShader", "imageShader",
    "baseMaterialShader", "baseNormalShader", "baseColorShader", "baseStrokeShader", "baseFilterShader",
    "buildMaterialShader", "buildNormalShader", "buildColorShader", "buildStrokeShader", "buildFilterShader"]);
  const isBuffer = (v) => v instanceof p5.Graphics || v instanceof p5.Framebuffer;
  const isImage = (v) => v instanceof p5.Image || isBuffer(v) || v instanceof Element || v instanceof ImageBitmap ||
    (typeof OffscreenCanvas !== "undefined" && v instanceof OffscreenCanvas) || v instanceof ImageData;
  // Buffers the sketch makes: a few, no larger than the largest canvas (GPU memory is shared).
  const MAX_BUFFERS = 16;
  let buffers = 0;
  const BUFFER_MAKERS = new Set(["createGraphics", "createFramebuffer", "createImage", "resize"]);
  const policeBuffer = (self, name, args) => {
    if (name !== "resize" && ++buffers > MAX_BUFFERS) denied("canvas:buffers", `more than ${MAX_BUFFERS} buffers`);
    const options = name === "createFramebuffer" && args[0] && typeof args[0] === "object" ? args[0] : null;
    const sides = name === "createFramebuffer" ? [options ? options.width : undefined, options ? options.height : undefined] : [args[0], args[1]];
    const ok = (v) => v === undefined || (typeof v === "number" && v > 0 && v <= maxSide);
    if (!sides.every(ok)) denied("canvas:buffer_size", `${name}: buffers may be at most ${maxSide} a side`);
  };
  const policeP5 = (self, name, args, who) => {
    if (BUFFER_MAKERS.has(name) && (name !== "resize" || self instanceof p5.Framebuffer)) policeBuffer(self, name, args);
    if (who.kind === "tip" && self === who.surface && SHAPES.has(name)) { count(`tip.${name}`); return; }
    if (TEXT.has(name)) { record(`text:${name}`); if (who.kind !== "sketch") throw new Error("text() is not allowed"); return; }
    if (who.kind !== "sketch" && (SHAPES.has(name) || IMAGES.has(name) || PIXELS.has(name) || SHADERS.has(name) || name === "filter")) {
      if (STYLE.has(name)) return;
      denied(`raw:callback:${name}`, `${name}() cannot draw from inside a p5.brush callback`);
    }
    if (SHAPES.has(name)) { if (!STYLE.has(name)) count(`p5.${name}`); return; }
    if (PIXELS.has(name) && !(name === "set" && args.length < 3)) denied(`raw:${name}`, `${name}() writes pixels`);
    if (IMAGES.has(name) && args.some((a) => isImage(a) && !isBuffer(a))) denied(`raw:${name}`, `${name}() draws an image`);
    if (SHADERS.has(name)) denied(`raw:${name}`, `${name}(): the sketch may not run its own shaders`);
    if (name === "filter" && args.some((a) => a instanceof p5.Shader)) denied("raw:filter", "filter() with a shader");
  };
  const wrapP5 = (f, name) => function (...args) {
    const who = caller(false);
    if (who) {
      const why = hiddenCode(args);
      if (why) denied(`hidden:${name}`, `${name} was given ${why}`);
      policeP5(this, name, args, who);
      args = markCallbacks(args, who.kind === "sketch" ? "sketch" : "brush");
    }
    return asLibrary(f, this, args, new.target);
  };
  // Loading, saving and DOM creation: blocked and recorded.
  const DOM_MAKERS = /^(create(Img|Video|Audio|Capture|Element|Div|P|Span|A|Slider|Button|Checkbox|Select|Radio|ColorPicker|Input|FileInput|Writer)|select|selectAll|removeElements)$/;
  const forbidKind = (name) => (/^(load|save|http)/.test(name) && name !== "loadPixels" ? "load" : DOM_MAKERS.test(name) ? "dom" : null);
  const forbid = (kind, name, f) => function (...args) {
    if (caller(false)) denied(`${kind}:${name}`, `${name}() is not available in the sandbox`);
    return asLibrary(f, this, args, new.target);
  };
  const proto = p5.prototype;
  // redraw runs the sketch's draw(), whatever function draw is by then: it must not count as library.
  const SKIP = new Set(["createCanvas", "pixelDensity", "resizeCanvas", "noCanvas", "remove", "redraw"]);  // handled below
  const wrapApi = (target) => {
    for (const name of Object.getOwnPropertyNames(target)) {
      if (name[0] === "_" || name === "constructor" || (target === proto && SKIP.has(name))) continue;
      const d = getDescriptor(target, name);
      if (!d || typeof d.value !== "function" || !d.writable) continue;
      const kind = forbidKind(name);
      target[name] = kind ? forbid(kind, name, d.value) : wrapP5(d.value, name);
    }
  };
  wrapApi(proto);
  wrapApi(p5.Graphics.prototype);
  wrapApi(p5.Framebuffer.prototype);

  // Below the API: renderers, shaders, textures, framebuffers' internals and the raw WebGL and
  // 2D contexts. The sketch calling any of these itself is drawing around p5.brush.
  const RAW_READS = /^(get|is|check|measureText$)/;
  const guardRaw = (target, label, only = () => true) => {
    if (!target) return;
    for (const name of Object.getOwnPropertyNames(target)) {
      if (name === "constructor" || RAW_READS.test(name) || !only(name)) continue;
      const d = getDescriptor(target, name);
      if (!d || typeof d.value !== "function" || !d.writable || !d.configurable) continue;
      const f = d.value;
      target[name] = function (...args) {
        if (caller(true)) denied(`raw:${label}.${name}`, `${label}.${name} is not available to the sketch`);
        return asLibrary(f, this, args, new.target);
      };
    }
  };
  const guarded = new Set();
  for (const name of ["Renderer2D", "RendererGL", "Shader", "Texture"]) {  // and the classes they extend
    for (let target = p5[name] && p5[name].prototype; target && target !== Object.prototype; target = getProto(target)) {
      if (!guarded.has(target)) { guarded.add(target); guardRaw(target, name); }
    }
  }
  guardRaw(p5.Framebuffer.prototype, "Framebuffer", (name) => name[0] === "_");
  // Raw contexts: only the calls that put pixels somewhere (or compile a shader) are guarded; path
  // building and state changes paint nothing by themselves, and p5.brush makes them by the million.
  const GL_PAINTS = /^(clear|clearBuffer\w*|draw\w*|(compressed)?[tT]ex(Sub)?Image[23]D|copyTex(Sub)?Image[23]D|blitFramebuffer|shaderSource|compileShader|linkProgram)$/;
  const CANVAS_PAINTS = /^(fill|stroke|fillRect|strokeRect|clearRect|fillText|strokeText|drawImage|putImageData|transferFromImageBitmap|reset)$/;
  for (const [ctx, paints] of [[WebGL2RenderingContext, GL_PAINTS], [WebGLRenderingContext, GL_PAINTS], [CanvasRenderingContext2D, CANVAS_PAINTS],
    [OffscreenCanvasRenderingContext2D, CANVAS_PAINTS], [ImageBitmapRenderingContext, CANVAS_PAINTS]]) {
    guardRaw(ctx && ctx.prototype, ctx && ctx.name, (name) => paints.test(name));
  }

  // The canvas: exactly one createCanvas(w, h, WEBGL) from the sketch, each side within
  // [minSide, maxSide], never resized; captured at the size it was made.
  let userCanvases = 0;
  let minSide = 256, maxSide = 1024;
  let made = null;  // {width, height, pixelWidth, pixelHeight} of the sketch's canvas
  let ownDefaultCanvas = false;  // true while p5 makes its default 100x100 canvas before setup
  const createCanvas = proto.createCanvas;
  proto.createCanvas = function (w, h, renderer, ...rest) {
    const who = ownDefaultCanvas ? null : caller(false);
    ownDefaultCanvas = false;
    if (who) {
      if (who.kind !== "sketch") denied("canvas:createCanvas_callback", "createCanvas from inside a p5.brush callback");
      userCanvases++;
      if (userCanvases > 1) denied("canvas:createCanvas_repeated", "createCanvas may be called once");
      const side = (v) => typeof v === "number" && Number.isFinite(v) && v >= minSide && v <= maxSide;
      if (!side(w) || !side(h)) denied("canvas:size", `each side of the canvas must be within ${minSide}-${maxSide}`);
      if (renderer !== "webgl") record("canvas:not_webgl");
    }
    const canvas = asLibrary(createCanvas, this, [w, h, renderer, ...rest]);
    if (who) {
      asLibrary(pixelDensity, this, [density]);
      made = { width: this.width, height: this.height, pixelWidth: this.canvas.width, pixelHeight: this.canvas.height };
    }
    return canvas;
  };
  for (const name of ["resizeCanvas", "noCanvas", "remove"]) proto[name] = forbid("canvas", name, proto[name]);
  p5.Graphics.prototype.resizeCanvas = forbid("canvas", "resizeCanvas", p5.Graphics.prototype.resizeCanvas);
  // The pool's density (1 unless it asks for fewer pixels: a 512 sketch painted at 0.5 is a
  // 256x256 image, a cheaper render); a sketch cannot change it.
  let density = 1;
  const pixelDensity = proto.pixelDensity;
  proto.pixelDensity = function (d) {
    if (d === undefined) return asLibrary(pixelDensity, this, []);
    return asLibrary(pixelDensity, this, [caller(false) ? density : d]);
  };
  // The DOM outside the canvas: creating elements from the sketch is a violation.
  const createElement = O.createElement;
  Document.prototype.createElement = function (tag, ...rest) {
    if (caller(true)) denied("dom:createElement", "createElement is not available in the sandbox");
    return createElement.call(this, tag, ...rest);
  };
  // navigator and screen: the sketch has no business reading them (p5 may).
  for (const [obj, name] of [[window, "navigator"], [window, "screen"], [window, "history"], [window, "visualViewport"]]) {
    const d = getDescriptor(obj, name);
    if (!d || !d.get || !d.configurable) continue;
    Object.defineProperty(obj, name, {
      get() { if (caller(true)) denied(`dom:${name}`, `${name} is not available in the sandbox`); return d.get.call(this); },
      configurable: false,
    });
  }

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
  // (except what p5 itself decorates when it starts, e.g. createVector)
  const decorated = (path) => [...p5.decorations.keys()].some((pattern) => pattern({ path }));
  for (const [target, path] of [[proto, "p5.prototype"], [p5.Graphics.prototype, "p5.Graphics.prototype"], [p5.Framebuffer.prototype, "p5.Framebuffer.prototype"]]) {
    seal(target, Object.getOwnPropertyNames(target).filter((n) => typeof getDescriptor(target, n).value === "function" &&
      getDescriptor(target, n).configurable && !decorated(`${path}.${n}`)));
  }
  // p5 decorates its classes' prototypes when it starts: those stay open (trusted as arguments only).
  for (const cls of [p5.Renderer, p5.Renderer2D, p5.RendererGL, p5.Shader, p5.Texture, p5.Image, p5.Color, p5.Vector, p5.Geometry]) {
    if (cls && cls.prototype) trustChain(cls.prototype);
  }
  trustChain(p5.prototype); trustChain(p5.Graphics.prototype); trustChain(p5.Framebuffer.prototype);
  seal(Document.prototype, ["createElement"]);
  // A sketch that makes every object thenable could answer for the harness; the built-in
  // prototypes are frozen once the libraries have loaded.
  for (const ctor of [Object, Array, Function, Promise, String, Number, Boolean, Symbol, Error, RegExp, Map, Set, JSON, Reflect, Date]) {
    Object.freeze(ctor.prototype || ctor);
  }
  Object.freeze(Reflect);

  // Everything p5.brush does in its own lifecycle hooks (the composite flush) is library work.
  for (const name of Object.keys(p5.lifecycleHooks)) {
    p5.lifecycleHooks[name] = p5.lifecycleHooks[name].map((hook) => function (...args) { return asLibrary(hook, this, args); });
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
  // CSP has no 'unsafe-eval' and allows no image source: eval, new Function and string timers
  // are refused and land here, and so does any image or media the sketch tries to load.
  document.addEventListener("securitypolicyviolation", (e) => {
    const directive = e.effectiveDirective || e.violatedDirective;
    if (e.blockedURI === "eval" || e.blockedURI === "wasm-eval") record("eval:csp");
    else if (/^(img|media|font)-src/.test(directive)) record(`load:csp:${directive}`);
    else record(`network:csp:${directive}`);
  });

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
    control.push(LIB);  // what runs from here on is the harness's
    try { instance && instance.noLoop(); } catch (e) { /* the sketch broke noLoop */ }
    inspect(observer.takeRecords());
    observer.disconnect();
    let shot = { png: null, width: 0, height: 0 };
    try { shot = capture(); } catch (e) { if (firstError === null) firstError = `capture failed: ${describe(e)}`; }
    if (made && shot.png && (shot.width !== made.pixelWidth || shot.height !== made.pixelHeight ||
        instance.width !== made.width || instance.height !== made.height)) record("canvas:resized");
    if (userCanvases === 0 && firstError === null) record("canvas:no_createCanvas");
    resolveRun({
      error: firstError,
      console: consoleDropped ? [...consoleLines, `(${consoleDropped} more console lines dropped)`] : consoleLines,
      calls: { ...calls },
      violations: P.violations(),
      js_ms,
      frames,
      png: shot.png,
      width: made ? made.width : 0,
      height: made ? made.height : 0,
    });
  }

  // Globals the sketch defines (setup, draw, other p5 hooks, helpers) run as the sketch's code
  // whoever calls them.
  const markGlobals = (before) => {
    for (const name of Object.getOwnPropertyNames(window)) {
      if (before.has(name)) continue;
      const d = getDescriptor(window, name);
      if (d && typeof d.value === "function" && d.writable) window[name] = asSketch(d.value, "sketch");
    }
  };

  function run(options) {
    if (started) throw new Error("one sketch per page");
    const { code, seed, maxFrames: frameLimit = 5, minSide: lo = 256, maxSide: hi = 1024, density: d = 1 } = options;
    if (typeof code !== "string") throw new Error("run({code, seed, ...}): code must be a string");
    started = true;
    maxFrames = frameLimit;
    minSide = lo;
    maxSide = hi;
    density = d;
    P.define(window, "eval", P.blocker("eval", "eval"));  // not before: Playwright's evaluate uses it
    P.reseed(seed);
    control.push(LIB);
    try { brush.seed(seed); brush.noiseSeed(seed); } finally { control.pop(); }
    P.arm();
    const done = new O.Promise((resolve) => { resolveRun = resolve; });
    // A source-URL comment would let the sketch's frames pass for the libraries'.
    if (/[#@]\s*source(Mapping)?URL\s*=/.test(code)) {
      record("eval:sourceURL");
      O.setTimeout(() => fail(new Error("sourceURL comments are not allowed")), 0);
      return done;
    }
    O.setTimeout(() => {
      t0 = O.now();
      observer.observe(document.documentElement, { subtree: true, childList: true, attributes: true, characterData: true });
      const script = createElement.call(document, "script");
      ownNodes.add(script);
      script.textContent = code;
      const before = new Set(Object.getOwnPropertyNames(window));
      document.body.appendChild(script);  // a SyntaxError or a top-level throw fires "error" here
      if (finished) return;
      if (typeof window.setup !== "function" && typeof window.draw !== "function") {
        fail(new Error("the sketch defines neither setup() nor draw()"));
        return;
      }
      markGlobals(before);
      instance = asLibrary(() => new p5(), null, []);  // global mode: binds p5's (wrapped) functions onto window
    }, 0);
    return done;
  }

  Object.defineProperty(window, "__lw", { value: Object.freeze({ run, ready: true }), writable: false, configurable: false });
})();
