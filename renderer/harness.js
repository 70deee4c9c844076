// The referee. Runs after p5, p5.brush, SES and the allowlist load, and before any sketch. The pool calls,
// once per page,
//   __lw.run({code, seed, maxFrames, minSide, maxSide, density})
// and its promise resolves with the render report (see `finish`).
//
// The sketch's world is the allowlist (lit_watercolour/allowlist.py, served as /allowlist.js): SES
// `lockdown()` freezes every JavaScript intrinsic, then the sketch is evaluated in a Compartment whose
// globals are exactly the table's allowed names; a refused name is a trap that records its category
// (the gate's reason) and throws; any other name does not exist. Objects handed to the sketch (buffers,
// vectors, colours, brush polygons, a custom tip's surface) are views through a membrane that answers only
// to the table's names, and every call through a view meets the same checks as its global twin. What the
// sketch hands to the libraries is copied to plain data (counted in values), its functions wrapped. A
// custom tip's surface is a view that lives only while its callback runs. Buffers the sketch makes are
// charged in bytes as they are (format, samples, density, snapshots); what p5.brush allocates on its own
// account is not the sketch's. The report is built here, out of the sketch's reach, from frozen
// built-ins; the pool checks its shape (a malformed one is the sketch's tampering).
(() => {
  "use strict";
  const P = window.__lwPrelude;
  delete window.__lwPrelude;
  const TABLE = window.__lwAllowlist;
  delete window.__lwAllowlist;
  const WORLD = new Map(Object.entries(TABLE.world));  // name -> category
  const REFUSED = new Set(TABLE.refused);
  const BUFFER_MEMBERS = new Set(TABLE.bufferMembers);
  const TIP_MEMBERS = new Set(["shape", "style", "transform", "colour"]);
  const apply = Reflect.apply;
  const construct = Reflect.construct;
  const { Graphics, Framebuffer, Vector, Color, Image: P5Image, Shader } = p5;
  const { FLOAT, HALF_FLOAT } = p5.prototype;
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
  // A refused name: the attempt is recorded under its category (a gate reason), and there is nothing behind it.
  const refuse = (category, name) => { record(`${category}:${name}`); throw new ReferenceError(`${name} is not defined in the sandbox (${category})`); };
  let finished = false;
  const live = () => { if (finished) throw new Error("the sketch's time is over"); };

  // --- buffers: the sketch's in bytes, as they are; the library's apart ----------------------------
  const MiB = 1048576;
  const SKETCH_BYTES = 80 * MiB;  // at 1024 px a side and density 1; run() scales it by both
  // What p5.brush and p5 allocate on their own account: a bound on harm only. Both budgets count what is
  // made, not what is kept: a removed buffer's memory is not back before the GPU process frees it.
  const LIBRARY_BYTES = 512 * MiB;
  const MAX_TIPS = 16;  // custom tips: p5.brush keeps a 500x500 surface for each
  let sketchBudget = 0, libraryBudget = 0, density = 1, maxSide = 1024, tips = 0;
  const charged = new WeakMap();  // sketch buffer or snapshot -> bytes charged
  const libraryCharged = new WeakSet();  // what p5.brush or p5 made on their own account
  let forSketch = 0;  // > 0 while a call of the sketch's allocates: what it makes is the sketch's
  const pixelsOf = (b) => {
    if (b instanceof Framebuffer) return [Math.ceil(b.width * b.density), Math.ceil(b.height * b.density)];
    const c = b.canvas;
    return c ? [c.width, c.height] : [Math.ceil(b.width * (b._pixelDensity || 1)), Math.ceil(b.height * (b._pixelDensity || 1))];
  };
  const bytesOf = (b) => {
    const [w, h] = pixelsOf(b);
    const px = w * h;
    if (b instanceof Framebuffer) {
      const colour = px * 4 * (b.format === FLOAT ? 4 : b.format === HALF_FLOAT ? 2 : 1);
      const depth = b.useDepth ? px * 4 : 0;
      const samples = b.antialias ? Math.max(1, b.antialiasSamples | 0) : 0;  // a multisampled copy besides the resolved one
      return (colour + depth) * (1 + samples);
    }
    if (b instanceof Graphics) return px * (b._renderer && b._renderer.GL ? 8 : 4);  // a WEBGL layer has depth too
    return px * 4;
  };
  const sideOk = (v) => v === undefined || (typeof v === "number" && v > 0 && v <= maxSide);
  const checkSides = (w, h) => { if (!sideOk(w) || !sideOk(h)) denied("canvas:buffer_size", `buffers may be at most ${maxSide} a side`); };
  const checkDensity = (w, h, d) => {
    if (typeof d === "number" && d > density && Math.max(w, h) * d > maxSide * density) denied("canvas:buffer_density", `buffers may be at most ${maxSide} a side at the page's density`);
  };
  // The sketch's buffer (or snapshot) measured as it is now, and the difference charged.
  const measure = (b) => {
    if (!(b instanceof Graphics || b instanceof Framebuffer || b instanceof P5Image)) return;
    const [w, h] = pixelsOf(b);
    const limit = Math.ceil(maxSide * density);
    const bytes = bytesOf(b);
    sketchBudget -= bytes - (charged.get(b) || 0);
    charged.set(b, bytes);
    if (w > limit || h > limit) denied("canvas:buffer_size", `buffers may be at most ${maxSide} a side at the page's density`);
    if (sketchBudget < 0) denied("canvas:buffer_bytes", "the sketch's buffers are over their byte budget (docs/gate.md)");
  };
  let started = false;
  const libraryAlloc = (target, name, sides) => {
    const f = target[name];
    target[name] = function (...args) {
      if (started) apply(checkSides, null, sides(this, args));
      const made = apply(f, this, args);
      if (started && !forSketch && made && typeof made === "object" && !libraryCharged.has(made)) {
        libraryCharged.add(made);
        libraryBudget -= bytesOf(made);
        if (libraryBudget < 0) denied("canvas:library_bytes", "the sketch made p5.brush allocate too much");
      }
      return made;
    };
  };
  const options = (a) => (a && typeof a === "object" ? a : {});
  for (const target of [p5.prototype, Graphics.prototype]) {
    libraryAlloc(target, "createGraphics", (_, [w, h]) => [w, h]);
    libraryAlloc(target, "createImage", (_, [w, h]) => [w, h]);
    libraryAlloc(target, "createFramebuffer", (self, [o]) => [options(o).width, options(o).height]);
  }

  // --- the membrane -------------------------------------------------------------------------
  const realOf = new WeakMap();  // view -> the library object behind it
  const viewOf = new WeakMap();  // library object -> its view
  const surfaceKind = (v) => (v instanceof Graphics || v instanceof Framebuffer ? "buffer" : v instanceof P5Image ? "image" : null);
  const dataKind = (v) => v instanceof Vector || v instanceof Color || BRUSH_CLASSES.has(v.constructor) || Object.getPrototypeOf(v) === Object.prototype;
  // Members of data views that lead out of the drawing API.
  const INTERNALS = new Set(["constructor", "elt", "canvas", "drawingContext", "renderer", "pixels", "parent", "gl", "framebuffer",
    "colorTexture", "depthTexture", "target", "prototype", "__proto__"]);
  const internal = (key) => typeof key !== "string" || key[0] === "_" || INTERNALS.has(key);
  const reach = (key) => { if (typeof key === "string" && key !== "constructor" && key !== "prototype" && key !== "__proto__") record(`raw_drawing:reach:${key}`); };
  const MAX_COPY = 100000;  // values (array elements, fields, 8 characters of a string) crossing in one call
  const tipSurfaces = new WeakSet();  // p5.brush's custom tip surfaces: never the sketch's outside their callback
  let liveTip = null;  // the tip surface whose callback is running
  const painted = new WeakSet();  // buffers p5.brush has painted on: the only ones image() may print
  const printed = new Map();  // buffer -> the frame it was last printed in
  let brushTarget = null;  // brush.load(target)
  const scopes = [];  // framebuffers whose draw scope is running

  const crossing = () => {
    let budget = MAX_COPY;
    return (n) => { budget -= n; if (budget < 0) denied("hidden_code:too_large", "an argument too large to copy"); };
  };
  // library -> sketch
  function toSketch(v, spend = crossing()) {
    if (typeof v === "string") { spend(1 + (v.length >> 3)); return v; }
    if ((typeof v !== "object" || v === null) && typeof v !== "function") return v;
    if (typeof v === "function") return undefined;  // only methods are callable, through their view
    if (ArrayBuffer.isView(v)) { spend(v.length || v.byteLength); return Array.from(v); }
    if (Array.isArray(v)) { spend(v.length); return v.map((x) => toSketch(x, spend)); }
    if (tipSurfaces.has(v)) return undefined;
    spend(1);
    const kind = surfaceKind(v) || (dataKind(v) ? "data" : null);
    return kind ? view(v, kind) : undefined;
  }
  // Members a view answers to: data (vectors, colours, brush objects) all but the internals; a surface only the table's.
  function view(target, kind, tip = false) {
    let v = tip ? undefined : viewOf.get(target);
    if (v) return v;
    let alive = true;
    const member = (key) => {
      if (kind === "data") {
        if (internal(key)) { reach(key); return undefined; }
        const value = Reflect.get(target, key);
        return typeof value === "function" ? (...args) => invoke(key, value, args) : toSketch(value);
      }
      if (typeof key !== "string") return undefined;
      if (tip && !alive) denied(`raw_drawing:tip_surface.${key}`, "a custom tip's surface ends with its callback");
      const category = WORLD.get(key);
      const allowed = category !== undefined && (kind === "image" ? key === "width" || key === "height"
        : tip ? TIP_MEMBERS.has(category) || key === "width" || key === "height" : BUFFER_MEMBERS.has(category));
      if (!allowed) {
        if (category !== undefined && REFUSED.has(category)) refuse(category, key);
        if (tip && category !== undefined) denied(`raw_drawing:tip_surface.${key}`, `a custom tip's surface is for its stamp: no ${key}()`);
        if (INTERNALS.has(key) || key[0] === "_") reach(key);
        return undefined;
      }
      const value = Reflect.get(target, key);
      if (typeof value !== "function") return toSketch(value);
      return (...args) => policed(target, key, args, value);
    };
    // brush objects (Polygon, Plot, Position) meet the checks of their brush.* twins
    const invoke = (key, f, args) => {
      const cls = BRUSH_CLASSES.get(target.constructor);
      if (cls) return brushCall(`brush.${cls}.${key}`, PAINTING_METHODS.has(key), f, target, args);
      live();
      return toSketch(apply(f, target, fromSketch(args)));
    };
    const handler = {
      get: (_, key) => member(key),
      set: (_, key, value) => {
        if (kind !== "data" || internal(key) || typeof Reflect.get(target, key) === "function") return false;
        return Reflect.set(target, key, fromSketch([value])[0]);
      },
      has: (_, key) => (kind === "data" ? !internal(key) && key in target : typeof key === "string" && WORLD.has(key) && key in target),
      ownKeys: () => (kind === "data" ? Reflect.ownKeys(target).filter((key) => !internal(key)) : []),
      getOwnPropertyDescriptor: (_, key) => {
        if (kind !== "data" || internal(key) || !Object.prototype.hasOwnProperty.call(target, key)) return undefined;
        return { value: member(key), writable: true, enumerable: true, configurable: true };
      },
      defineProperty: () => false,
      deleteProperty: () => false,
      getPrototypeOf: () => null,
      setPrototypeOf: () => false,
      preventExtensions: () => false,
    };
    v = new Proxy({}, handler);
    realOf.set(v, target);
    if (!tip) viewOf.set(target, v);
    return tip ? [v, () => { alive = false; }] : v;
  }

  // sketch -> library: plain data, views unwrapped, functions wrapped as the sketch's callbacks
  // (`brush`: p5.brush calls them in the middle of its own painting; `scope`: p5 runs them as a drawing scope)
  function fromSketch(args, kind = "brush") {
    const spend = crossing();
    const copy = (v, depth) => {
      if (typeof v === "string") { spend(1 + (v.length >> 3)); return v; }
      if ((typeof v !== "object" || v === null) && typeof v !== "function") { spend(1); return v; }
      if (realOf.has(v)) {
        const real = realOf.get(v);
        if (tipSurfaces.has(real)) denied("raw_drawing:tip_surface_source", "a custom tip's surface is never a source");
        return real;
      }
      if (typeof v === "function") return callback(v, kind);
      if (depth > 16) denied("hidden_code:too_deep", "an argument too deep to copy");
      if (ArrayBuffer.isView(v)) { spend(v.length || v.byteLength); return Array.from(v); }
      if (Array.isArray(v)) {
        spend(v.length);
        const out = [];
        for (let i = 0; i < v.length; i++) out.push(copy(v[i], depth + 1));
        return out;
      }
      const keys = Object.keys(v);
      spend(keys.length + 1);
      const out = {};
      for (const key of keys) out[key] = copy(v[key], depth + 1);
      return out;
    };
    return args.map((a) => copy(a, 0));
  }
  // A sketch function the libraries call (a custom tip, a vector field, a framebuffer's draw scope): it sees
  // views of what it is given; a custom tip's first argument is its own surface, alive for this call only.
  let inBrush = 0;  // sketch callbacks of p5.brush running: they may shape a tip, never paint
  const callback = (fn, kind) => function (...args) {
    live();
    const before = liveTip;
    let end = null;
    const seen = args.map((a, i) => {
      if (kind === "brush" && i === 0 && a instanceof Graphics) {
        tipSurfaces.add(a);
        liveTip = a;
        const [tipView, kill] = view(a, "buffer", true);
        end = kill;
        return tipView;
      }
      return toSketch(a);
    });
    if (kind === "brush") inBrush++;
    try {
      return fromSketch([apply(fn, undefined, seen)], kind)[0];
    } finally {
      if (end) end();
      liveTip = before;
      if (kind === "brush") inBrush--;
    }
  };

  // --- the rules of p5's API, for the global facade and every view alike ------------------------
  const isBuffer = (v) => v instanceof Graphics || v instanceof Framebuffer;
  const ALLOCATES = new Set(["createGraphics", "createFramebuffer", "get", "resize"]);
  const PAINTS = new Set(["shape", "layers", "filter", "buffer"]);
  let frames = 0;
  // A layer's background() is its paper. Printed over part of the canvas, a paper that is not the canvas's own
  // (another colour, tinted, blended, or over paint already there) is a flat block: a bare rectangle.
  const paperOf = new WeakMap();  // canvas instance or layer -> RGBA of its last background(); none after clear()
  const rgba = (args) => { try { return instance.color(...args)._getRGBA([255, 255, 255, 255]); } catch (e) { return [0, 0, 0, 255]; } };
  // Whether image(src, x, y, w, h) on `onto` covers all of it, through the current transform and image mode.
  const covers = (r, onto, src, real) => {
    let [x, y] = [Number(real[1]) || 0, Number(real[2]) || 0];
    let [w, h] = [typeof real[3] === "number" ? real[3] : src.width, typeof real[4] === "number" ? real[4] : src.height];
    if (r.states.imageMode === p5.prototype.CENTER) { x -= w / 2; y -= h / 2; } else if (r.states.imageMode === p5.prototype.CORNERS) { w -= x; h -= y; }
    const gl = Boolean(r.states.uModelMatrix);
    const m = gl ? r.states.uModelMatrix.mat4 : null;
    const d = gl ? null : r.drawingContext.getTransform();
    const t = gl ? [m[0], m[1], m[4], m[5], m[12], m[13]] : [d.a, d.b, d.c, d.d, d.e, d.f];
    if (Math.abs(t[1]) > 1e-9 || Math.abs(t[2]) > 1e-9) return false;  // turned or sheared: corners of paper left showing
    const xs = [], ys = [];
    for (const [px, py] of [[x, y], [x + w, y], [x, y + h], [x + w, y + h]]) { xs.push(t[0] * px + t[2] * py + t[4]); ys.push(t[1] * px + t[3] * py + t[5]); }
    const scale = gl ? 1 : r._pixelDensity || 1;  // a 2D context's transform is in device pixels, from the top left
    const [left, top] = gl ? [-onto.width / 2, -onto.height / 2] : [0, 0];
    const [right, bottom] = [left + onto.width * scale, top + onto.height * scale];
    return Math.min(...xs) <= left + 1 && Math.max(...xs) >= right - 1 && Math.min(...ys) <= top + 1 && Math.max(...ys) >= bottom - 1;
  };
  const flatBlock = (self, src, real) => {
    const paper = paperOf.get(src);
    if (!paper || paper[3] <= 0) return false;
    const onto = scopes.length ? scopes[scopes.length - 1] : self;
    const r = self._renderer;
    if (!r || covers(r, onto, src, real)) return false;  // a whole new paper, as background() is
    const tint = r.states.tint ? r.states.tint._getRGBA([255, 255, 255, 255]) : null;
    const base = paperOf.get(onto);
    return Boolean(tint && (tint[0] < 255 || tint[1] < 255 || tint[2] < 255)) || r.states.curBlendMode !== p5.prototype.BLEND ||
      painted.has(onto) || !base || base.some((x, i) => Math.abs(x - paper[i]) >= 1);
  };
  const policed = (self, name, args, f) => {
    live();
    const category = WORLD.get(name);
    const onTip = self === liveTip && self !== null;
    if (inBrush && !onTip && PAINTS.has(category) && name !== "get") denied(`raw_drawing:callback:${name}`, `${name}() cannot draw from inside a p5.brush callback`);
    if (category === "shape") {
      if (!onTip) refuse("bare_primitives", name);
      count(`tip.${name}`);
    }
    const real = fromSketch(args, "scope");
    // The page's density; a sketch reads it, never sets it, and asking a buffer for more than a side can hold is refused.
    if (name === "pixelDensity") {
      if (self !== instance && isBuffer(self)) checkDensity(self.width, self.height, real[0]);
      return apply(f, self, []);
    }
    if (name === "image") {
      const src = real[0];
      if (!isBuffer(src)) denied("raw_drawing:image", "image() prints only the sketch's own buffers");
      if (!painted.has(src)) denied("bare_primitives:image_unpainted", "image() prints only a buffer p5.brush has painted");
      if (flatBlock(self, src, real)) denied("bare_primitives:image_flat", "image() prints a layer's flat background as a block");
      if (printed.get(src) === frames) denied("bare_primitives:image_tiled", "image() prints a buffer once a frame");
      printed.set(src, frames);
    }
    if (name === "background" && real.some((a) => a !== null && typeof a === "object" && !(a instanceof Color) && !Array.isArray(a))) denied("raw_drawing:background", "background() takes a colour");
    if (name === "filter" && real.some((a) => a instanceof Shader || (a !== null && typeof a === "object"))) denied("raw_drawing:filter", "filter() with a shader");
    if (name === "createFramebuffer") {
      const o = options(real[0]);
      checkDensity(o.width ?? instance.width, o.height ?? instance.height, o.density);
      real[0] = { ...o, density };  // the page's, like the canvas
    }
    if (name === "createGraphics" || name === "resize") checkSides(real[0], real[1]);
    const scope = self instanceof Framebuffer && (name === "draw" || name === "begin");  // drawing into the framebuffer
    if (scope) scopes.push(self);
    let out;
    forSketch++;
    try {
      out = apply(f, self, real);
    } finally {
      forSketch--;
      if (scope && name === "draw") scopes.pop();  // begin()'s scope lasts until its end()
      if (name === "end" && self instanceof Framebuffer && scopes[scopes.length - 1] === self) scopes.pop();
    }
    if (name === "background" || name === "clear") {
      const target = scopes.length ? scopes[scopes.length - 1] : self;
      if (name === "clear") paperOf.delete(target);
      else paperOf.set(target, rgba(real));
    }
    if (ALLOCATES.has(name)) {
      if (out instanceof Graphics || out instanceof Framebuffer || out instanceof P5Image) measure(out);
      if (name === "resize") measure(self);
    }
    return toSketch(out);
  };

  // --- the facade: the sketch's only globals --------------------------------------------------
  let instance = null;
  let made = null;  // {width, height, pixelWidth, pixelHeight} of the sketch's canvas
  let minSide = 256;
  const globals = Object.create(null);
  const missing = [];  // allowed names this page could not provide (a test keeps it empty)
  const p5Member = (name) => {
    for (let proto = p5.prototype; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
      const d = Object.getOwnPropertyDescriptor(proto, name);
      if (d) return d;
    }
    return undefined;
  };
  const instanceValue = (name) => ({ get: () => (instance ? toSketch(instance[name]) : undefined), enumerable: true });
  const RealDate = Date;
  const VirtualDate = function Date(...args) {
    const t = P.EPOCH + Math.floor(P.now());
    if (!new.target) return new RealDate(t).toString();
    return construct(RealDate, args.length ? args : [t]);
  };
  const clockPart = (part) => () => apply(RealDate.prototype[part], new RealDate(P.EPOCH + Math.floor(P.now())), []);
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
  const createCanvas = (w, h, renderer) => {
    live();
    if (made) denied("canvas:createCanvas_repeated", "createCanvas may be called once");
    const side = (v) => typeof v === "number" && Number.isFinite(v) && v >= minSide && v <= maxSide;
    if (!side(w) || !side(h)) denied("canvas:size", `each side of the canvas must be within ${minSide}-${maxSide}`);
    if (renderer !== p5.prototype.WEBGL) record("canvas:not_webgl");
    instance.createCanvas(w, h, renderer === p5.prototype.WEBGL ? renderer : undefined);
    instance.pixelDensity(density);
    made = { width: instance.width, height: instance.height, pixelWidth: instance.canvas.width, pixelHeight: instance.canvas.height };
    return undefined;
  };
  const PAINTING = new Set(["arc", "circle", "endShape", "endStroke", "flowLine", "hatchArray", "line", "polygon", "rect", "spline", "massArray"]);
  const PAINTING_METHODS = new Set(["draw", "fill", "hatch", "wash", "mass", "show", "plotTo"]);
  // One path for brush.* and for the methods of brush objects: the same clock, callback and count.
  function brushCall(label, paints, f, self, args) {
    live();
    if (inBrush && paints) denied(`raw_drawing:callback:${label}`, `${label} cannot paint from inside a p5.brush callback`);
    if (label === "brush.add") {
      const type = options(args[1]).type;
      if (type === "image") denied("external_load:brush.add", "an image tip loads a file");
      if (type === "custom" && ++tips > MAX_TIPS) denied("canvas:tips", `at most ${MAX_TIPS} custom tips`);
    }
    const real = fromSketch(args);
    if (label === "brush.load") brushTarget = isBuffer(real[0]) ? real[0] : null;
    if (paints) {
      count(label);
      painted.add(brushTarget || (scopes.length ? scopes[scopes.length - 1] : instance));
    } else if (self === BRUSH) count(label);
    return toSketch(apply(f, self, real));
  }
  const brushFacade = Object.create(null);
  for (const [name, f] of Object.entries(BRUSH)) {
    if (typeof f !== "function" || name === "instance") continue;
    if (BRUSH_CLASSES.has(f)) {
      brushFacade[name] = function (...args) {
        if (!new.target) throw new TypeError(`brush.${name} is a class`);
        live();
        return view(construct(f, fromSketch(args)), "data");
      };
    } else {
      brushFacade[name] = (...args) => brushCall(`brush.${name}`, PAINTING.has(name), f, BRUSH, args);
    }
  }
  const VectorFacade = function (...args) { return view(construct(Vector, fromSketch(args)), "data"); };
  for (const name of Object.getOwnPropertyNames(Vector)) {
    if (typeof Vector[name] === "function" && !internal(name)) VectorFacade[name] = (...args) => toSketch(apply(Vector[name], Vector, fromSketch(args)));
  }
  const SeededMath = Object.create(null);
  for (const key of Object.getOwnPropertyNames(Math)) SeededMath[key] = Math[key];
  SeededMath.random = P.random;
  VirtualDate.prototype = RealDate.prototype;
  VirtualDate.now = () => P.EPOCH + Math.floor(P.now());
  VirtualDate.parse = RealDate.parse;
  VirtualDate.UTC = RealDate.UTC;
  const getRandomValues = (array) => {
    if (!ArrayBuffer.isView(array) || array instanceof Float32Array || array instanceof Float64Array) throw new TypeError("getRandomValues needs an integer typed array");
    const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
    for (let i = 0; i < bytes.length; i++) bytes[i] = P.randomByte();
    return array;
  };
  // The names the page builds itself; the rest of the allowed table is p5's or the language's.
  const OWN = {
    createCanvas,
    brush: Object.freeze(brushFacade),
    p5: Object.freeze({ Vector: Object.freeze(VectorFacade) }),
    Math: Object.freeze(SeededMath),
    Date: Object.freeze(VirtualDate),
    performance: Object.freeze({ now: P.now }),
    second: clockPart("getUTCSeconds"), minute: clockPart("getUTCMinutes"), hour: clockPart("getUTCHours"),
    day: clockPart("getUTCDate"), month: () => clockPart("getUTCMonth")() + 1, year: clockPart("getUTCFullYear"),
    // a sketch reads its frame rate; setting one is the page's (a slow rate would hold the page)
    frameRate: () => (instance ? instance.frameRate() : 60),
    orbitControl: () => undefined,  // nothing moves the pointer: the camera stays
    crypto: Object.freeze({
      getRandomValues,
      randomUUID: () => {
        const b = getRandomValues(new Uint8Array(16));
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
        return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
      },
    }),
    console: Object.freeze(sketchConsole),
    print: sketchConsole.log,
  };
  const builtins = new Set();  // the language's names: the compartment's own, else the page's frozen ones
  for (const [name, category] of WORLD) {
    if (REFUSED.has(category)) {
      Object.defineProperty(globals, name, { get: () => refuse(category, name), enumerable: false });
      continue;
    }
    if (category === "shape") {  // a tip's stamp, on its surface; as a global, a bare primitive
      Object.defineProperty(globals, name, { get: () => (inBrush ? refuse("raw_drawing", `callback:${name}`) : refuse("bare_primitives", name)), enumerable: false });
      continue;
    }
    if (category === "buffer") {  // members of a layer; the sketch's own remove() is the canvas's
      if (name === "remove") Object.defineProperty(globals, name, { get: () => refuse("canvas", name), enumerable: false });
      continue;
    }
    if (name in OWN) { globals[name] = OWN[name]; continue; }
    if (category === "javascript") { builtins.add(name); continue; }
    const d = p5Member(name);
    if (d && typeof d.value === "function") {
      const f = d.value;
      globals[name] = function (...args) {
        if (!instance) throw new ReferenceError(`${name}() is not available before setup()`);
        return policed(instance, name, args, f);
      };
    } else if (d && /^[A-Z][A-Z0-9_]*$/.test(name) && !d.get) {
      globals[name] = d.value;  // p5's constants: PI, WEBGL, BLUR, ...
    } else if (d || ["width", "height", "frameCount", "deltaTime", "mouseX", "mouseY", "pmouseX", "pmouseY", "mouseIsPressed", "key",
      "keyCode", "keyIsPressed", "windowWidth", "windowHeight", "displayWidth", "displayHeight", "focused"].includes(name)) {
      Object.defineProperty(globals, name, instanceValue(name));
    } else {
      missing.push(name);
    }
  }

  // --- the run ------------------------------------------------------------------------------
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

  // The compartment's globals made the table's: its own evaluators, hardening helpers and every other
  // name not on the table removed; the language's built-ins it lacks taken from the page when frozen.
  const inCompartment = new Set(Reflect.ownKeys(new Compartment({ __options__: true }).globalThis));
  const fromPage = Object.create(null);  // the language's built-ins a compartment lacks, taken from the page when frozen
  for (const name of builtins) {
    if (inCompartment.has(name)) continue;
    const value = window[name];
    if ((typeof value === "function" || (typeof value === "object" && value !== null)) && Object.isFrozen(value)) fromPage[name] = value;
    else missing.push(name);
  }
  Object.freeze(missing);
  function world(compartment) {
    const g = compartment.globalThis;
    for (const name of Object.getOwnPropertyNames(g)) {
      if (builtins.has(name)) continue;
      if (!Reflect.deleteProperty(g, name)) throw new Error(`the sandbox cannot remove ${name}`);
    }
    for (const [name, value] of Object.entries(fromPage)) Object.defineProperty(g, name, { value, writable: true, configurable: true });
    Object.defineProperties(g, Object.getOwnPropertyDescriptors(globals));
  }

  function run(opts) {
    if (started) throw new Error("one sketch per page");
    const { code, seed, maxFrames: frameLimit = 5, minSide: lo = 256, maxSide: hi = 1024, density: d = 1 } = opts;
    if (typeof code !== "string") throw new Error("run({code, seed, ...}): code must be a string");
    started = true;
    maxFrames = frameLimit;
    minSide = lo;
    maxSide = hi;
    density = d;
    sketchBudget = SKETCH_BYTES * (hi / 1024) ** 2 * d * d;
    libraryBudget = LIBRARY_BYTES;
    P.reseed(seed);
    BRUSH.seed(seed);
    BRUSH.noiseSeed(seed);
    const done = new Promise((resolve) => { resolveRun = resolve; });
    setTimeoutReal(() => {
      t0 = P.realNow();
      const compartment = new Compartment({ __options__: true });
      world(compartment);
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

  Object.defineProperty(window, "__lw", { value: Object.freeze({ run, ready: true, missing }), writable: false, configurable: false });
})();
