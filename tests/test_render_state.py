"""Nothing survives a render: a writer and then readers rendered in one pool, one of them in the writer's own
page (renewed), and no reader finds any of the writer's state, whatever API it tries.

The pool erases the origin's stored data when it renews a page (sandbox.pages). The first pair runs with the
page's whole world (a harness that runs its code in the page's own realm, beside the real prelude), so the
property does not rest on the sketch's facade; the second is the red team's pair through the real page: a
palette stored with p5's `storeItem` by one sketch and looked for with `getItem` by the next (both refused now).
"""

from __future__ import annotations

import asyncio
import json
import shutil

from lit_watercolour.sandbox import RenderPool
from lit_watercolour.sandbox.pages import RENDERER_DIR

# The page's own realm, no facade: `run` evaluates its code as an async function body and reports what it
# returns as one console line; every write and read below is caught, so the render is clean and its page reused.
OPEN_HARNESS = """(() => {
  const run = async ({ code }) => {
    const found = await (new Function(`return (async () => { ${code} })()`))();
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = 8;
    return { error: null, console: [JSON.stringify(found)], calls: {}, violations: [], js_ms: 0,
             png: canvas.toDataURL("image/png"), width: 8, height: 8 };
  };
  Object.defineProperty(window, "__lw", { value: Object.freeze({ run, ready: true }) });
})();"""

TRY = """const tried = {};
const attempt = async (name, f) => { try { tried[name] = await f(); } catch (e) { tried[name] = "refused: " + e.name; } };
const opened = (request) => new Promise((ok, no) => { request.onsuccess = () => ok(request.result); request.onerror = () => no(request.error); });
"""

WRITER = TRY + """
await attempt("localStorage", () => { localStorage.setItem("palette", "#c2185b"); return "written"; });
await attempt("sessionStorage", () => { sessionStorage.setItem("palette", "#c2185b"); return "written"; });
await attempt("cookie", () => { document.cookie = "palette=c2185b; max-age=3600"; return "written"; });
await attempt("indexedDB", async () => {
  const request = indexedDB.open("paint", 1);
  request.onupgradeneeded = () => request.result.createObjectStore("palette");
  const db = await opened(request);
  db.transaction("palette", "readwrite").objectStore("palette").put("#c2185b", "colour");
  return "written";
});
await attempt("caches", async () => { await (await caches.open("paint")).put("/palette", new Response("#c2185b")); return "written"; });
await attempt("opfs", async () => { await (await navigator.storage.getDirectory()).getFileHandle("palette", { create: true }); return "written"; });
await attempt("cookieStore", async () => { await cookieStore.set("palette", "c2185b"); return "written"; });
await attempt("windowName", () => { window.name = "#c2185b"; return "written"; });
await attempt("history", () => { history.replaceState({ palette: "#c2185b" }, ""); return "written"; });
return tried;
"""

READER = TRY + """
await attempt("localStorage", () => localStorage.getItem("palette"));
await attempt("sessionStorage", () => sessionStorage.getItem("palette"));
await attempt("cookie", () => document.cookie);
await attempt("indexedDB", async () => (await indexedDB.databases()).map((d) => d.name).join(","));
await attempt("caches", async () => (await caches.keys()).join(","));
await attempt("opfs", async () => { const names = []; for await (const name of (await navigator.storage.getDirectory()).keys()) names.push(name); return names.join(","); });
await attempt("cookieStore", async () => (await cookieStore.getAll()).map((c) => c.name).join(","));
await attempt("windowName", () => window.name);
await attempt("history", () => JSON.stringify(history.state));
return tried;
"""


async def writer_then_readers(writer: str, reader: str, **pool_args):
    """The writer's result, and each reader's with whether it ran in the writer's browser context. In a pool of
    one page the first reader gets the spare page warmed while the writer painted; the second, the writer's page
    with a new document."""
    async with RenderPool(size=1, browsers=1, timeout_s=60.0, **pool_args) as pool:
        contexts, paint = [], pool._paint

        async def traced(warm, *args):
            contexts.append(warm.context)
            return await paint(warm, *args)

        pool._paint = traced
        wrote = await pool.render(writer)
        await pool.settled()
        reads = [await pool.render(reader) for _ in range(2)]
        return wrote, [(read, context is contexts[0]) for read, context in zip(reads, contexts[1:])]


def test_a_reader_finds_nothing_its_writer_stored_whatever_api_it_tries(tmp_path):
    for name in ("sandbox.html", "prelude.js"):
        shutil.copy(RENDERER_DIR / name, tmp_path / name)
    (tmp_path / "harness.js").write_text(OPEN_HARNESS)
    wrote, reads = asyncio.run(writer_then_readers(WRITER, READER, page_dir=str(tmp_path)))
    assert wrote.error is None and any(same for _, same in reads)  # a reader ran in the writer's page, renewed
    wrote, reads = json.loads(wrote.console[0]), [json.loads(read.console[0]) for read, _ in reads]
    for read in reads:
        assert set(read) == set(wrote) == {"localStorage", "sessionStorage", "cookie", "indexedDB", "caches", "opfs",
                                           "cookieStore", "windowName", "history"}
        assert not any("c2185b" in str(value) or value == "paint" for value in read.values()), read
    # the writer did store (caches, OPFS and the cookie store are for secure pages only, which the sandbox is not)
    assert {k for k, v in wrote.items() if v == "written"} == {"localStorage", "sessionStorage", "cookie", "indexedDB",
                                                               "windowName", "history"}


PALETTE = """function setup() {{
  createCanvas(256, 256, WEBGL);
  noLoop();
  {step}
}}
function draw() {{
  translate(-width / 2, -height / 2);
  brush.noStroke();
  brush.fill("#3a6ea5", 170);
  brush.circle(128, 128, 60);
}}
"""
STORE = 'try { storeItem("palette", "#c2185b"); console.log("stored"); } catch (e) { console.log("not stored"); }'
LOOK = 'let found = null; try { found = getItem("palette"); } catch (e) { } console.log("found " + found);'


def test_a_palette_stored_by_one_sketch_is_not_there_for_the_next():
    """p5's storage is not in the sketch's world (lit_watercolour.allowlist): the writer's storeItem is refused as
    `dom`, so its page is not reused (the open-harness pair above covers a renewed page), and no reader finds it."""
    wrote, reads = asyncio.run(writer_then_readers(PALETTE.format(step=STORE), PALETTE.format(step=LOOK)))
    assert wrote.violations == ["dom:storeItem"] and wrote.console == ["log: not stored"]
    for read, _ in reads:
        assert read.console == ["log: found null"] and read.violations == ["dom:getItem"], read
