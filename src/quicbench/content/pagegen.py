"""Generated page archives: pages shaped like the HTTP Archive's, written as HAR 1.2 with bodies.

``quicbench page generate`` builds a page of a shape (``p10``, ``p50``, ``p90``) from a seed:
its request count, requests and bytes by type (HTML, JavaScript, CSS, images, fonts, other),
its number of origins and its dependency depth follow the HTTP Archive's published
distributions (the Web Almanac 2024; every figure and its source in docs/pages.md). Every
byte, name and choice is a function of (shape, seed, scale): the same arguments give the same
file. ``scale`` multiplies the bytes only (counts, origins and depth stay): the committed
corpus (``data/pages/``) is at 1/10 of the weights to keep the repository small.

The page's dependency chain is real: the HTML references style sheets, scripts, images,
iframes and preloaded data (depth 2); style sheets declare the fonts (depth 3); a chain of
scripts, each on another third-party origin, injects the next one (the third-party inclusion
chain) and the last one fetches data and appends images (up to the shape's depth).
"""

from __future__ import annotations

import base64
import json
import math
import random
from dataclasses import dataclass
from typing import Any

from quicbench.content.page import noise_png
from quicbench.errors import QuicbenchError

KB = 1000


@dataclass(frozen=True)
class Shape:
    """Requests by type, bytes by type (KB), origins and depth of one percentile shape."""
    requests: int
    html: int
    js: int
    css: int
    img: int
    font: int
    html_kb: float       # the page's own document
    js_kb: float
    css_kb: float
    img_kb: float
    font_kb: float
    third_parties: int
    depth: int


# Web Almanac 2024, Page Weight and Third Parties chapters (mobile where it differs); each figure
# with its source and what quicbench chose where nothing is published: docs/pages.md
SHAPES: dict[str, Shape] = {
    "p10": Shape(requests=22, html=1, js=5, css=2, img=4, font=0, html_kb=18, js_kb=89, css_kb=8, img_kb=62,
                 font_kb=0, third_parties=9, depth=2),
    "p50": Shape(requests=66, html=2, js=22, css=8, img=16, font=3, html_kb=18, js_kb=570, css_kb=75, img_kb=900,
                 font_kb=111, third_parties=27, depth=3),
    "p90": Shape(requests=170, html=12, js=69, css=26, img=55, font=9, html_kb=18, js_kb=1732, css_kb=260,
                 img_kb=5905, font_kb=333, third_parties=70, depth=7),
}
IFRAME_BYTES = 4 * KB      # extra HTML documents (iframes): quicbench's choice
OTHER_BYTES = (500, 5 * KB)   # other requests (JSON data): quicbench's choice, uniform
STARTED = "2026-01-01T00:00:00.000Z"   # every entry's startedDateTime: deterministic files


@dataclass
class Resource:
    kind: str            # html, js, css, img, font, other, iframe
    name: str
    size: int
    origin: str = ""
    depth: int = 2
    parent: "Resource | None" = None
    children: list["Resource"] | None = None
    blocking: bool = False

    @property
    def url(self) -> str:
        return f"https://{self.origin}/{self.name}"


MIME = {"html": "text/html; charset=utf-8", "iframe": "text/html; charset=utf-8", "js": "text/javascript",
        "css": "text/css", "img": "image/png", "font": "font/woff2", "other": "application/json"}
EXT = {"js": "js", "css": "css", "img": "png", "font": "woff2", "other": "json", "iframe": "html"}


def _split(rng: random.Random, total: int, n: int, minimum: int) -> list[int]:
    """total bytes over n requests with log-normal weights (sizes within a page vary widely)."""
    if n == 0:
        return []
    w = [math.exp(rng.gauss(0, 1)) for _ in range(n)]
    s = sum(w)
    return [max(minimum, int(total * x / s)) for x in w]


def _pad(text: str, size: int, open_: str, close: str) -> str:
    """text padded to exactly size bytes inside a trailing comment (never cut: code stays whole)."""
    room = size - len(text) - len(open_) - len(close) - 1
    if room < 0:
        return text
    return text + open_ + ("quicbench " * (room // 10 + 1))[:room] + close + "\n"


def plan_page(shape_name: str, seed: int, scale: float = 1.0) -> tuple[str, list[Resource]]:
    """The page's resources (names, sizes, origins, depths, parents), the document first."""
    if shape_name not in SHAPES:
        raise QuicbenchError(f"page shape {shape_name!r}; accepted: {', '.join(SHAPES)}")
    if not 0 < scale <= 10:
        raise QuicbenchError(f"scale {scale}: accepted 0 < scale <= 10 (multiplies the bytes only)")
    sh = SHAPES[shape_name]
    rng = random.Random(f"quicbench-pagegen/{shape_name}/{seed}")
    site = f"{shape_name}-s{seed}"
    first = f"www.{site}.test"
    thirds = [f"{site}-tp{k:02d}.test" for k in range(1, sh.third_parties + 1)]
    b = lambda kb: int(kb * KB * scale)   # noqa: E731

    other = max(0, sh.requests - (sh.html + sh.js + sh.css + sh.img + sh.font))
    doc = Resource("html", "", max(1024, b(sh.html_kb)), first, depth=1, children=[])
    res: list[Resource] = []
    for kind, n, total, minimum in (("js", sh.js, b(sh.js_kb), 400), ("css", sh.css, b(sh.css_kb), 300),
                                    ("img", sh.img, b(sh.img_kb), 100), ("font", sh.font, b(sh.font_kb), 200)):
        for i, size in enumerate(_split(rng, total, n, minimum)):
            res.append(Resource(kind, f"{kind}/{kind}{i + 1}.{EXT[kind]}", size))
    res += [Resource("iframe", f"frames/frame{i + 1}.html", max(300, b(IFRAME_BYTES / KB)))
            for i in range(sh.html - 1)]
    res += [Resource("other", f"data/data{i + 1}.json", max(64, int(rng.uniform(*OTHER_BYTES) * scale)))
            for i in range(other)]

    # the inclusion chain: scripts at depths 2 .. depth-1, each on another third party, each
    # injecting the next; the last one's data and images are at the shape's depth
    js = [r for r in res if r.kind == "js"]
    chain = js[:max(0, sh.depth - 2)]
    for k, r in enumerate(chain):
        r.depth = 2 + k
        r.origin = thirds[k % len(thirds)] if thirds else first
        r.children = []
        parent = chain[k - 1] if k else doc
        r.parent = parent
        parent.children.append(r)
    # origins: every third party serves at least one request; the rest 60 % first party
    unused = [t for t in thirds if t not in {r.origin for r in chain}]
    order = [r for r in res if r not in chain]
    rng.shuffle(order)
    for i, r in enumerate(order):
        r.origin = unused[i] if i < len(unused) else (first if rng.random() < 0.6 else rng.choice(thirds or [first]))
    css = [r for r in res if r.kind == "css"]
    for r in res:
        if r in chain:
            continue
        r.children = r.children or []
        if r.kind == "font" and css:
            r.parent, r.depth = css[0], 3                   # declared by the first style sheet
        elif r.kind == "other" and chain:
            r.parent, r.depth = chain[-1], chain[-1].depth + 1   # fetched by the last script of the chain
        elif r.kind == "img" and chain and int(r.name.split("img")[-1].split(".")[0]) % 4 == 0:
            r.parent, r.depth = chain[-1], chain[-1].depth + 1   # a quarter appended by script
        else:
            r.parent, r.depth = doc, 2
        r.parent.children = r.parent.children or []
        r.parent.children.append(r)
    # two scripts of the document block rendering (in <head>), as real pages' first scripts
    for r in [r for r in js if r.parent is doc and r not in chain][:2]:
        r.blocking = True
    return f"https://{first}/", [doc, *res]


def _script(r: Resource, rng: random.Random) -> str:
    lines = [f"// quicbench generated page: {r.name}", "window.qb = window.qb || {};",
             f'window.qb["{r.name}"] = "{rng.getrandbits(64):016x}";']
    for c in r.children or []:
        if c.kind == "js":
            lines.append(f'(function(){{var s=document.createElement("script");s.src="{c.url}";'
                         f'document.head.appendChild(s);}})();')
        elif c.kind == "img":
            lines.append(f'(function(){{var i=document.createElement("img");i.src="{c.url}";i.width=32;i.height=32;'
                         f'i.alt="";document.body.appendChild(i);}})();')
        elif c.kind == "other":
            lines.append(f'fetch("{c.url}").then(function(r){{return r.text();}}).catch(function(){{}});')
    return _pad("\n".join(lines) + "\n", r.size, "/*", "*/")


def _style(r: Resource, rng: random.Random) -> str:
    lines = [f"/* quicbench generated page: {r.name} */"]
    for k, c in enumerate(r.children or []):
        fam = c.name.rsplit("/", 1)[-1].split(".")[0]
        lines.append(f'@font-face{{font-family:"{fam}";src:url("{c.url}") format("woff2");font-display:swap}}')
        lines.append(f'.{fam}{{font-family:"{fam}",sans-serif}}')
    n = 0
    while sum(len(x) + 1 for x in lines) < r.size - 200:
        n += 1
        lines.append(f".c{n}{{color:#{rng.getrandbits(24):06x};margin:{rng.randint(0, 40)}px;"
                     f"padding:{rng.randint(0, 24)}px}}")
    return _pad("\n".join(lines) + "\n", r.size, "/*", "*/")


def _document(doc: Resource, rng: random.Random, fonts: list[Resource]) -> str:
    head = ['<!DOCTYPE html>', '<html><head><meta charset="utf-8">', '<link rel="icon" href="data:,">',
            '<title>quicbench generated page</title>']
    body = ['<body>', '<h1>quicbench generated page</h1>']
    for c in doc.children or []:
        if c.kind == "css":
            head.append(f'<link rel="stylesheet" href="{c.url}">')
        elif c.kind == "js" and c.blocking:
            head.append(f'<script src="{c.url}"></script>')
        elif c.kind == "js":
            body.append(f'<script async src="{c.url}"></script>')
        elif c.kind == "img":
            body.append(f'<p><img src="{c.url}" width="64" height="64" alt="image"></p>')
        elif c.kind == "iframe":
            body.append(f'<iframe src="{c.url}" width="120" height="60" title="frame"></iframe>')
        elif c.kind == "other":
            head.append(f'<link rel="preload" as="fetch" href="{c.url}" crossorigin>')
    words = "page origin request response stream connection handshake latency bandwidth image script".split()
    classes = [f.name.rsplit("/", 1)[-1].split(".")[0] for f in fonts]
    # every font is used by some text (a browser downloads only the fonts a page uses)
    paras = [f'<p class="{c}">' + " ".join(rng.choice(words) for _ in range(12)) + "</p>" for c in classes]
    k = 0
    text = "\n".join(head) + "</head>\n" + "\n".join(body)
    while len(text) + sum(len(p) + 1 for p in paras) < doc.size - 400:
        cls = f' class="{classes[k % len(classes)]}"' if classes else ""
        paras.append(f"<p{cls}>" + " ".join(rng.choice(words) for _ in range(40)) + "</p>")
        k += 1
    return _pad(text + "\n" + "\n".join(paras) + "\n</body></html>\n", doc.size, "<!--", "-->")


def body_of(r: Resource, seed: int, shape_name: str, rng: random.Random, fonts: list[Resource]) -> bytes:
    key = f"quicbench-pagegen/{shape_name}/{seed}/{r.name}"
    if r.kind == "html":
        return _document(r, rng, fonts).encode()
    if r.kind == "js":
        return _script(r, rng).encode()
    if r.kind == "css":
        return _style(r, rng).encode()
    if r.kind == "img":
        return noise_png(key, max(84, r.size))
    if r.kind == "font":
        import hashlib
        return b"wOF2" + hashlib.shake_256(key.encode()).digest(max(0, r.size - 4))
    if r.kind == "iframe":
        return _pad('<!DOCTYPE html><html><head><meta charset="utf-8"><title>frame</title></head>'
                    '<body><p>frame</p></body></html>\n', r.size, "<!--", "-->").encode()
    data = json.dumps({"name": r.name, "v": f"{rng.getrandbits(64):016x}"})
    return _pad(data + "\n", r.size, "", "").encode() if r.size > len(data) + 2 else data.encode()


def generate_page(shape_name: str, seed: int, scale: float = 1.0) -> dict[str, Any]:
    """A HAR 1.2 document of the generated page, bodies included (binary ones base64)."""
    url, resources = plan_page(shape_name, seed, scale)
    rng = random.Random(f"quicbench-pagegen-bodies/{shape_name}/{seed}")
    fonts = [r for r in resources if r.kind == "font"]
    entries = []
    for r in sorted(resources, key=lambda r: r.depth):
        body = body_of(r, seed, shape_name, rng, fonts)
        binary = r.kind in ("img", "font")
        content = {"size": len(body), "mimeType": MIME[r.kind],
                   "text": base64.b64encode(body).decode() if binary else body.decode()}
        if binary:
            content["encoding"] = "base64"
        headers = [{"name": "Content-Type", "value": MIME[r.kind]},
                   {"name": "Cache-Control", "value": "no-store"},
                   # fonts, fetches and preloads from other origins are CORS requests
                   {"name": "Access-Control-Allow-Origin", "value": "*"}]
        entries.append({
            "pageref": "page_1", "startedDateTime": STARTED, "time": 0,
            "request": {"method": "GET", "url": r.url, "httpVersion": "HTTP/2", "cookies": [], "headers": [],
                        "queryString": [], "headersSize": -1, "bodySize": 0},
            "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/2", "cookies": [],
                         "headers": headers, "content": content, "redirectURL": "", "headersSize": -1,
                         "bodySize": len(body)},
            "cache": {}, "timings": {"send": 0, "wait": 0, "receive": 0},
            "_quicbench": {"kind": r.kind, "depth": r.depth,
                           "parent": (r.parent.url if r.parent else None)},
        })
    sh = SHAPES[shape_name]
    return {"log": {
        "version": "1.2",
        "creator": {"name": "quicbench page generate", "version": "1"},
        "pages": [{"startedDateTime": STARTED, "id": "page_1", "title": url, "pageTimings": {}}],
        "entries": entries,
        "_quicbench": {"shape": shape_name, "seed": seed, "scale": scale, "requests": len(entries),
                       "origins": len({e["request"]["url"].split("/")[2] for e in entries}),
                       "depth": max(r.depth for r in resources), "third_parties": sh.third_parties},
    }}
