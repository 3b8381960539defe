"""A realistic web page like DNCS-HTTP3's (about 10 MB in 125 requests), deterministic from a seed.

DNCS-HTTP3 (seed 004) loaded one static page in Chrome over HTTP/1.1, HTTP/2 and HTTP/3: 10.1 MB
of page weight in 125 to 140 requests, with an 84,200-byte ``index.html``. Their page itself is
not published, so this module builds a stand-in with the same weight and request count and a
size mix like that of real pages (most of the weight in images, then scripts, style sheets
and web fonts; many small requests, a few large ones):

====================  =====  ==========================================================
resource              count  sizes
====================  =====  ==========================================================
``index.html``        1      84,200 B (DNCS's page), references every resource below
``css/*.css``         10     4 KB .. 90 KB of style rules (one declares the fonts)
``js/*.js``           20     5 KB .. 420 KB of script (2 blocking in <head>, 18 deferred)
``fonts/*.woff2``     6      18 KB .. 72 KB (preloaded, and used by the style sheets)
``img/*.svg``         16     1 KB .. 8 KB icons (text)
``img/*.png``         72     6 KB .. 700 KB: thumbnails, photos and two hero images
====================  =====  ==========================================================

In total 125 requests and about 10.2 MB (sizes vary by +-10 % with the seed). Every byte is a function of the seed only (no
library whose output could change between versions): binary bodies are SHAKE-256 output as
in content.py; PNGs are valid, decodable images whose pixels are SHAKE-256 noise stored in
uncompressed deflate blocks (incompressible, like photos); fonts are SHAKE-256 bytes behind a
WOFF2 signature (the browser downloads them in full, then rejects them: only the transfer
matters here); CSS, JS and SVG are text generated from a seeded PRNG. ``index.html`` sets
``<link rel="icon" href="data:,">`` so the browser makes no extra favicon request, and no
image is lazy-loaded, so a load fetches exactly the 125 resources.

make_realistic_page(directory, seed) writes index.html and its resources and returns their
manifest entries ({"path", "size", "sha256"}, paths relative to the content root).
noise_png(key, size) / noise_png_iter(key, size) make a decodable PNG of exactly size bytes:
what a page's images must be, since Chromium stops downloading an <img> it cannot decode.
"""

from __future__ import annotations

import hashlib
import random
import struct
import zlib
from pathlib import Path

PAGE_DIR = "realistic"
INDEX_BYTES = 84_200          # DNCS's index.html (content-length in their httpstat output)
N_CSS, N_JS, N_FONTS, N_SVG, N_PNG = 10, 20, 6, 16, 72
N_RESOURCES = 1 + N_CSS + N_JS + N_FONTS + N_SVG + N_PNG      # 125, as DNCS's page over h1

# nominal sizes (bytes) before the seed's jitter of +-10 %
CSS_SIZES = (4_000, 8_000, 12_000, 18_000, 25_000, 35_000, 45_000, 60_000, 70_000, 90_000)
JS_SIZES = (5_000, 8_000, 12_000, 15_000, 20_000, 25_000, 30_000, 40_000, 50_000, 60_000,
            70_000, 80_000, 95_000, 110_000, 130_000, 160_000, 200_000, 250_000, 320_000, 420_000)
FONT_SIZES = (18_000, 24_000, 30_000, 42_000, 56_000, 72_000)
SVG_SIZES = tuple(1_000 + 450 * i for i in range(N_SVG))                 # 1 KB .. 7.8 KB
PNG_SIZES = (tuple(6_000 + 1_000 * i for i in range(24))                # thumbnails 6..29 KB
             + tuple(40_000 + 2_500 * i for i in range(34))             # medium 40..122 KB
             + tuple(150_000 + 15_000 * i for i in range(12))           # large 150..315 KB
             + (600_000, 700_000))                                      # two hero images
assert len(PNG_SIZES) == N_PNG


def _shake(seed: int, name: str, n: int) -> bytes:
    return hashlib.shake_256(f"quicbench-page/{seed}/{name}".encode()).digest(n)


def _jitter(rng: random.Random, size: int) -> int:
    return max(200, int(size * rng.uniform(0.9, 1.1)))


def _pad_text(text: str, size: int, comment: tuple[str, str]) -> str:
    """Cut or pad text (ASCII) to exactly size bytes, padding inside a trailing comment."""
    open_, close = comment
    if len(text) + len(open_) + len(close) + 1 > size:
        text = text[: max(0, size - len(open_) - len(close) - 1)]
        text = text[: text.rfind("\n") + 1] if "\n" in text else ""
    room = size - len(text) - len(open_) - len(close) - 1
    filler = ("quicbench " * (room // 10 + 1))[:max(room, 0)]
    out = text + open_ + filler + close + "\n"
    return out[:size] if len(out) > size else out


def _hex(rng: random.Random, n: int) -> str:
    return "%0*x" % (n, rng.getrandbits(4 * n))


def _css(rng: random.Random, i: int, size: int, fonts: list[str]) -> str:
    lines = [f"/* quicbench realistic page: style sheet {i} */"]
    if fonts:
        for k, f in enumerate(fonts):
            lines.append(f'@font-face{{font-family:"qb-font-{k}";src:url("../{f}") format("woff2");'
                         f"font-display:block}}")
        lines += [f".font-{k}{{font-family:\"qb-font-{k}\",sans-serif}}" for k in range(len(fonts))]
    n = 0
    while sum(len(l) + 1 for l in lines) < size:
        n += 1
        lines.append(f".s{i}-c{n}{{color:#{_hex(rng, 6)};background:#{_hex(rng, 6)};margin:{rng.randint(0, 40)}px "
                     f"{rng.randint(0, 40)}px;padding:{rng.randint(0, 24)}px;border:1px solid #{_hex(rng, 6)};"
                     f"font-size:{rng.randint(10, 32)}px}}")
    return _pad_text("\n".join(lines) + "\n", size, ("/*", "*/"))


def _js(rng: random.Random, i: int, size: int) -> str:
    lines = [f"// quicbench realistic page: script {i}", "window.qb = window.qb || {};",
             f'window.qb["m{i}"] = [];']
    while sum(len(l) + 1 for l in lines) < size:
        lines.append(f'window.qb["m{i}"].push("{_hex(rng, 120)}");')
    lines.append(f'window.qb["m{i}_done"] = window.qb["m{i}"].length;')
    return _pad_text("\n".join(lines) + "\n", size, ("/*", "*/"))


def _svg(rng: random.Random, size: int) -> str:
    lines = ['<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" viewBox="0 0 64 64">']
    while sum(len(l) + 1 for l in lines) < size - 8:
        lines.append(f'<circle cx="{rng.randint(0, 64)}" cy="{rng.randint(0, 64)}" r="{rng.randint(1, 12)}" '
                     f'fill="#{_hex(rng, 6)}"/>')
    return _pad_text("\n".join(lines) + "\n", size - 7, ("<!--", "-->")) + "</svg>\n"


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


MIN_PNG = 8 + 25 + 12 + 15 + 12 + 12       # a 1x1 image with an empty pad chunk: 84 bytes
_BLOCK = 65535                              # payload of one stored deflate block
_CHUNK = 1 << 22


def _png_layout(size: int) -> tuple[int, int]:
    """(width, height) of the noise PNG of exactly size bytes: about square, at most 2048 wide."""
    fixed = 8 + 25 + 12 + 12 + 12          # signature, IHDR, IDAT, pad and IEND chunk framing

    def total(width: int, height: int) -> int:
        raw = height * (3 * width + 1)
        return fixed + 2 + raw + 5 * max(1, -(-raw // _BLOCK)) + 4

    width = min((1, 64, 128, 256, 512, 1024, 2048), key=lambda w: abs(w - (size / 3) ** 0.5))
    height = max(1, (size - fixed) // (3 * width + 1))
    while height > 1 and total(width, height) > size:
        height -= 1
    if total(width, height) > size:        # one row is too wide: a 1-pixel-wide image
        width, height = 1, 1
    return width, height


def _shake_stream(key: str, n: int):
    """n deterministic bytes in chunks (per-chunk SHAKE-256 keys, as content.object_bytes_iter)."""
    for off in range(0, n, _CHUNK):
        yield hashlib.shake_256(f"{key}/{off}".encode()).digest(min(_CHUNK, n - off))


def noise_png_iter(key: str, size: int):
    """The bytes of noise_png(key, size) in chunks, without holding the image in memory."""
    if size < MIN_PNG:
        raise ValueError(f"a PNG needs at least {MIN_PNG} bytes, asked for {size}")
    width, height = _png_layout(size)
    stride = 3 * width + 1
    raw_len = height * stride
    zlen = 2 + raw_len + 5 * max(1, -(-raw_len // _BLOCK)) + 4
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    yield b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
    # IDAT: a zlib stream of stored (uncompressed) deflate blocks, byte-exact whatever the zlib
    crc = zlib.crc32(b"IDAT\x78\x01")
    yield struct.pack(">I", zlen) + b"IDAT\x78\x01"
    adler, done, pending = 1, 0, bytearray()

    def rows():
        per = max(1, _CHUNK // stride)
        for row0 in range(0, height, per):
            n = min(per, height - row0)
            data = bytearray(hashlib.shake_256(f"{key}/pixels/{row0}".encode()).digest(n * stride))
            data[::stride] = bytes(n)      # filter type 0 (None) on every row
            yield data

    for data in rows():
        pending += data
        out = bytearray()
        while len(pending) >= _BLOCK and done + _BLOCK < raw_len:
            block, pending = pending[:_BLOCK], pending[_BLOCK:]
            out += b"\x00" + struct.pack("<HH", _BLOCK, 0xFFFF ^ _BLOCK) + block
            adler = zlib.adler32(block, adler)
            done += _BLOCK
        if out:
            crc = zlib.crc32(out, crc)
            yield bytes(out)
    last = bytes(pending)                  # the final block (BFINAL = 1)
    out = b"\x01" + struct.pack("<HH", len(last), 0xFFFF ^ len(last)) + last
    out += struct.pack(">I", zlib.adler32(last, adler))
    crc = zlib.crc32(out, crc)
    yield out + struct.pack(">I", crc)
    # a private ancillary chunk of noise pads the file to exactly size bytes
    pad = size - (8 + 25 + 12 + zlen) - 12 - 12
    crc = zlib.crc32(b"qbPd")
    yield struct.pack(">I", pad) + b"qbPd"
    for chunk in _shake_stream(f"{key}/pad", pad):
        crc = zlib.crc32(chunk, crc)
        yield chunk
    yield struct.pack(">I", crc) + _png_chunk(b"IEND", b"")


def noise_png(key: str, size: int) -> bytes:
    """A valid RGB PNG of exactly size bytes whose pixels are SHAKE-256 noise derived from key.

    Incompressible and decodable, so a browser downloads it in full (Chromium stops
    downloading an <img> body it cannot decode). Pixels sit in uncompressed deflate blocks;
    a private ancillary chunk (``qbPd``, ignored by decoders) pads to the exact size.
    Sizes below MIN_PNG (84) bytes cannot hold a PNG: ValueError. noise_png_iter streams it.
    """
    return b"".join(noise_png_iter(key, size))


def _png(seed: int, name: str, size: int) -> bytes:
    return noise_png(f"quicbench-page/{seed}/{name}", size)


def _font(seed: int, name: str, size: int) -> bytes:
    return b"wOF2" + _shake(seed, name, size - 4)


def _index(rng: random.Random, css: list[str], js: list[str], fonts: list[str], imgs: list[tuple[str, int, int]],
           size: int) -> str:
    head = ['<!DOCTYPE html>', '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<title>quicbench realistic page</title>", '<link rel="icon" href="data:,">']
    head += [f'<link rel="preload" href="{f}" as="font" type="font/woff2" crossorigin>' for f in fonts]
    head += [f'<link rel="stylesheet" href="{c}">' for c in css]
    head += [f'<script src="{j}"></script>' for j in js[:2]]
    head += [f'<script src="{j}" defer></script>' for j in js[2:]]
    head.append("</head><body>")
    body = ['<header class="font-0"><h1>quicbench realistic page</h1></header>']
    words = ("quic http latency stream packet browser page load server client network handshake "
             "congestion window loss delay jitter bandwidth object image script style font").split()
    for k, (src, w, h) in enumerate(imgs):
        body.append(f'<figure class="font-{k % len(fonts)}"><img src="{src}" width="{w}" height="{h}" alt="image {k}">'
                    f"<figcaption>{' '.join(rng.choice(words) for _ in range(8))}</figcaption></figure>")
    body.append('<article class="font-1">')
    tail = ["</article>", "<footer>generated by quicbench (content_page.py)</footer>", "</body></html>", ""]
    fixed = "\n".join(head + body + tail)
    paras = []
    while len(fixed) + sum(len(p) + 1 for p in paras) < size - 200:
        paras.append("<p>" + " ".join(rng.choice(words) for _ in range(40)) + "</p>")
    tail_text = "\n".join(tail)
    while True:
        text = "\n".join(head + body + paras) + "\n"
        room = size - len(text) - len(tail_text) - len("<!---->\n")
        if room >= 0 or not paras:
            break
        paras.pop()
    return text + "<!--" + "x" * max(0, room) + "-->\n" + tail_text


def make_realistic_page(directory: Path, seed: int) -> list[dict]:
    """Write index.html and its 124 resources into directory; return their manifest entries."""
    rng = random.Random(f"quicbench-page/{seed}")
    directory = Path(directory)
    for sub in ("css", "js", "fonts", "img"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {}
    fonts = [f"fonts/font-{k + 1}.woff2" for k in range(N_FONTS)]
    for k, s in enumerate(FONT_SIZES):
        files[fonts[k]] = _font(seed, fonts[k], _jitter(rng, s))
    css = [f"css/style-{k + 1}.css" for k in range(N_CSS)]
    for k, s in enumerate(CSS_SIZES):
        files[css[k]] = _css(rng, k + 1, _jitter(rng, s), fonts if k == 0 else []).encode()
    js = [f"js/script-{k + 1}.js" for k in range(N_JS)]
    sizes = list(JS_SIZES)
    rng.shuffle(sizes)
    for k, s in enumerate(sizes):
        files[js[k]] = _js(rng, k + 1, _jitter(rng, s)).encode()
    imgs: list[tuple[str, int, int]] = []
    images: list[tuple[str, int]] = [(f"img/icon-{k + 1}.svg", s) for k, s in enumerate(SVG_SIZES)]
    images += [(f"img/photo-{k + 1}.png", s) for k, s in enumerate(PNG_SIZES)]
    rng.shuffle(images)                      # icons and photos interleaved through the page
    for path, s in images:
        s = _jitter(rng, s)
        if path.endswith(".svg"):
            files[path] = _svg(rng, s).encode()
            imgs.append((path, 64, 64))
        else:
            files[path] = _png(seed, path, s)
            w, h = struct.unpack(">II", files[path][16:24])
            imgs.append((path, min(w, 320), max(1, min(w, 320) * h // w)))
    index = _index(rng, css, js, fonts, imgs, INDEX_BYTES).encode()
    entries = []
    for rel, data in [("index.html", index), *files.items()]:
        (directory / rel).write_bytes(data)
        entries.append({"path": f"{PAGE_DIR}/{rel}", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return entries


def page_resources(entries: list[dict]) -> list[str]:
    """URL paths of a realistic page's resources (index.html first), from its manifest entries."""
    return ["/" + e["path"] for e in entries if e["path"].startswith(PAGE_DIR + "/")]
