"""The sketch's world: every name a sketch can reach, and every name it may reach for and be refused.

One table, `WORLD`, lists each name with its category. The sandboxed page (renderer/harness.js, which
receives this table as /allowlist.js) builds the sketch's globals from it and nothing else: a name in
an allowed category exists; a name in a refused category exists only as a trap that records the attempt
under that category (a gate reason) and throws a ReferenceError; every other name does not exist. A
buffer handed to the sketch answers only to the names of the categories in `BUFFER_MEMBERS`.

The allowed API is the prompts' (lit_watercolour/prompts.py: the skeleton, `brush`, hex colours, degrees)
plus what honest p5.brush painting needs: maths, colour, transforms, noise and random, layers within the
byte budget, p5's built-in filters. docs/gate.md's list is `markdown()` (tests/test_gate.py checks it).

    python -m lit_watercolour.allowlist   # the markdown list docs/gate.md carries
"""

from __future__ import annotations

import json

# category -> (what it is, its names). Allowed categories first; the refused ones are gate reasons.
_TABLE: dict[str, tuple[str, str]] = {
    "skeleton": ("the prompt's skeleton and the sketch's own canvas",
                 "createCanvas WEBGL P2D width height noLoop loop isLooping redraw frameCount setAttributes "
                 "windowWidth windowHeight displayWidth displayHeight displayDensity pixelDensity focused"),
    "brush": ("p5.brush 2.2.2, every export checked and counted", "brush"),
    "maths": ("arithmetic, trigonometry, vectors and curve sampling",
              "abs ceil constrain dist exp floor fract lerp log mag map max min norm pow round sq sqrt sin cos tan "
              "asin acos atan atan2 degrees radians angleMode createVector p5 PI TWO_PI HALF_PI QUARTER_PI TAU "
              "DEG_TO_RAD RAD_TO_DEG DEGREES RADIANS bezierPoint bezierTangent splinePoint splineTangent"),
    "random": ("seeded randomness and noise", "random randomSeed randomGaussian noise noiseSeed noiseDetail shuffle Math crypto"),
    "colour": ("colours and colour spaces",
               "color red green blue alpha hue saturation brightness lightness lerpColor paletteLerp colorMode "
               "RGB RGBA HSB HSL HWB LAB LCH OKLAB OKLCH"),
    "transform": ("the transform stack",
                  "translate rotate rotateX rotateY rotateZ scale shearX shearY push pop resetMatrix applyMatrix camera "
                  "perspective ortho frustum createCamera setCamera linePerspective screenToWorld worldToScreen"),
    "style": ("drawing state, for a custom tip's stamp and for compositing layers",
              "fill noFill stroke noStroke strokeWeight strokeCap strokeJoin rectMode ellipseMode imageMode "
              "blendMode smooth noSmooth tint noTint BLEND ADD DARKEST LIGHTEST DIFFERENCE EXCLUSION MULTIPLY SCREEN "
              "REPLACE OVERLAY HARD_LIGHT SOFT_LIGHT DODGE BURN SUBTRACT CENTER CORNER CORNERS RADIUS ROUND SQUARE "
              "PROJECT MITER BEVEL CLOSE curveDetail bezierOrder splineProperty splineProperties erase noErase lights "
              "noLights ambientLight directionalLight pointLight spotLight lightFalloff specularColor ambientMaterial "
              "specularMaterial normalMaterial emissiveMaterial shininess metalness"),
    "layers": ("buffers within the byte budget, painted with p5.brush and composited",
               "createGraphics createFramebuffer image background clear get FLOAT HALF_FLOAT UNSIGNED_BYTE"),
    "filter": ("p5's built-in filters", "filter BLUR GRAY THRESHOLD INVERT POSTERIZE DILATE ERODE OPAQUE"),
    "clock": ("virtual time: one seed paints one picture",
              "millis second minute hour day month year deltaTime frameRate getFrameRate getTargetFrameRate Date "
              "performance"),
    "input": ("the pointer and keys, fixed (nothing moves them)",
              "mouseX mouseY pmouseX pmouseY mouseIsPressed key keyCode keyIsPressed keyIsDown orbitControl"),
    "data": ("p5's conversions and a console kept in the report",
             "nf nfc nfp nfs str int float hex unhex boolean byte char unchar splitTokens console print"),
    "javascript": ("the language's own frozen built-ins",
                   "globalThis Infinity NaN undefined isFinite isNaN parseFloat parseInt Array ArrayBuffer BigInt "
                   "BigInt64Array BigUint64Array Boolean DataView Int8Array Int16Array Int32Array Uint8Array "
                   "Uint8ClampedArray Uint16Array Uint32Array Float32Array Float64Array Map Number Object Promise "
                   "Set String Symbol WeakMap WeakSet Iterator JSON Reflect RegExp Error EvalError RangeError "
                   "ReferenceError SyntaxError TypeError URIError AggregateError decodeURI decodeURIComponent "
                   "encodeURI encodeURIComponent escape unescape TextEncoder TextDecoder"),
    "buffer": ("members of a layer only", "draw begin end remove resize"),
    "shape": ("p5's shapes: a custom tip's stamp on its own surface, during its callback; anywhere else bare_primitives",
              "arc bezier circle curve ellipse line point quad rect spline square triangle beginShape endShape vertex "
              "bezierVertex splineVertex quadraticVertex curveVertex beginContour endContour"),
    # refused: the gate's reason for reaching for them
    "bare_primitives": ("p5's 3-D shapes", "box cone cylinder ellipsoid plane sphere torus model buildGeometry"),
    "network": ("the network",
                "fetch XMLHttpRequest WebSocket EventSource RTCPeerConnection webkitRTCPeerConnection RTCDataChannel "
                "Worker SharedWorker WebTransport BroadcastChannel importScripts sendBeacon httpGet httpPost httpDo"),
    "external_load": ("files and images, in or out",
                      "loadImage loadJSON loadStrings loadTable loadXML loadBytes loadBlob loadModel save saveCanvas "
                      "saveFrames saveGif saveJSON saveStrings saveTable downloadFile writeFile createWriter "
                      "encodeAndDownloadGif createImg createVideo createAudio createCapture Image "
                      "createImageBitmap ImageDecoder Blob File FileReader URL OffscreenCanvas ImageData"),
    "dom": ("the page, its storage, dialogs, pointer and timers",
            "window self top parent frames opener document location navigator history screen visualViewport "
            "localStorage sessionStorage indexedDB caches cookieStore alert confirm prompt open setTimeout "
            "setInterval requestAnimationFrame queueMicrotask MessageChannel postMessage addEventListener "
            "structuredClone createElement createDiv createP createSpan createA createSlider createButton "
            "createCheckbox createSelect createRadio createColorPicker createInput createFileInput select selectAll "
            "removeElements getURL getURLPath getURLParams describe describeElement gridOutput textOutput cursor "
            "noCursor requestPointerLock exitPointerLock fullscreen storeItem getItem clearStorage removeItem "
            "setFrameRate"),
    "text": ("text and fonts",
             "text textFont textSize textAlign textLeading textStyle textWidth textAscent textDescent textWrap "
             "textBounds textToPoints textToContours textToModel textDirection textProperty textProperties textMode "
             "textWeight fontBounds fontWidth fontAscent fontDescent loadFont"),
    "eval": ("evaluators, the hardening library's included",
             "eval Function Compartment lockdown harden WebAssembly ModuleSource"),
    "hidden_code": ("objects that run code when read", "Proxy"),
    "raw_drawing": ("drawing around p5.brush: pixels, shaders, contexts, copies, debug drawing",
                    "drawingContext pixels createImage loadPixels updatePixels set copy blend texture imageLight panorama "
                    "createShader createFilterShader shader strokeShader imageShader resetShader loadShader "
                    "loadFilterShader baseMaterialShader baseNormalShader baseColorShader baseStrokeShader "
                    "baseFilterShader buildMaterialShader buildNormalShader buildColorShader buildStrokeShader "
                    "buildFilterShader debugMode noDebugMode"),
    "canvas": ("the canvas itself", "resizeCanvas noCanvas"),
}

REFUSED = frozenset(("bare_primitives", "network", "external_load", "dom", "text", "eval", "hidden_code", "raw_drawing", "canvas"))
ALLOWED = frozenset(_TABLE) - REFUSED
BUFFER_MEMBERS = frozenset(("skeleton", "colour", "transform", "style", "layers", "filter", "buffer", "shape"))
CATEGORIES: dict[str, str] = {category: about for category, (about, _) in _TABLE.items()}


def _world() -> dict[str, str]:
    world: dict[str, str] = {}
    for category, (_, names) in _TABLE.items():
        for name in names.split():
            if name in world:
                raise ValueError(f"{name} is in both {world[name]} and {category}")
            world[name] = category
    return world


WORLD: dict[str, str] = _world()  # name -> category


def page_script() -> bytes:
    """The table as the page's /allowlist.js (harness.js takes it and deletes it before any sketch runs)."""
    table = {"world": WORLD, "refused": sorted(REFUSED), "bufferMembers": sorted(BUFFER_MEMBERS)}
    return f"Object.defineProperty(window, '__lwAllowlist', {{ value: Object.freeze({json.dumps(table)}), configurable: true }});\n".encode()


def markdown() -> str:
    """The table as docs/gate.md lists it."""
    lines = ["| category | allowed | names |", "|---|---|---|"]
    for category, (about, names) in _TABLE.items():
        allowed = "refused" if category in REFUSED else "yes"
        lines.append(f"| `{category}`: {about} | {allowed} | {', '.join(f'`{n}`' for n in names.split())} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
