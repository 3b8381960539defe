"""The realistic page (DNCS-HTTP3's ~10 MB, 125-request page): deterministic, complete, well-formed."""

import hashlib
import io
import re
import struct
import zlib
from collections import Counter

import pytest

from quicbench.content.objects import generate
from quicbench.content.page import (INDEX_BYTES, MIN_PNG, N_RESOURCES, make_realistic_page, noise_png,
                                    page_resources)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    d = tmp_path_factory.mktemp("page")
    return {name: (d / name, make_realistic_page(d / name / "realistic", seed))
            for name, seed in (("a", 7), ("b", 7), ("c", 8))}


def test_deterministic_from_the_seed(pages):
    (ra, a), (rb, b), (rc, c) = pages["a"], pages["b"], pages["c"]
    assert a == b                                    # same seed: same paths, sizes and hashes
    for e in a:
        assert (ra / e["path"]).read_bytes() == (rb / e["path"]).read_bytes()
    assert {e["path"] for e in a} == {e["path"] for e in c}             # another seed: same resources ...
    hc = {e["path"]: e["sha256"] for e in c}
    assert sum(e["sha256"] != hc[e["path"]] for e in a) == len(a)       # ... with other bytes


def test_count_size_and_mix_like_dncs(pages):
    root, entries = pages["a"]
    assert len(entries) == N_RESOURCES == 125
    total = sum(e["size"] for e in entries)
    assert 9_800_000 <= total <= 10_500_000          # DNCS: 10.1 MB
    kinds = Counter(e["path"].rsplit(".", 1)[1] for e in entries)
    assert kinds == {"html": 1, "css": 10, "js": 20, "woff2": 6, "svg": 16, "png": 72}
    by_kind = Counter()
    for e in entries:
        by_kind[e["path"].rsplit(".", 1)[1]] += e["size"]
    assert by_kind["png"] > 0.6 * total and by_kind["js"] > by_kind["css"] > by_kind["woff2"]
    assert entries[0]["path"] == "realistic/index.html" and entries[0]["size"] == INDEX_BYTES
    sizes = sorted(e["size"] for e in entries)
    assert sizes[0] < 2_000 and sizes[-1] > 500_000   # icons to hero images


def test_manifest_entries_match_the_files(pages):
    root, entries = pages["a"]
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert files == {e["path"] for e in entries}
    for e in entries:
        data = (root / e["path"]).read_bytes()
        assert len(data) == e["size"] and hashlib.sha256(data).hexdigest() == e["sha256"]


def test_index_references_every_resource_once(pages):
    root, entries = pages["a"]
    html = (root / "realistic/index.html").read_text()
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    refs = [r for r in refs if not r.startswith("data:")]
    assert sorted(refs) == sorted(e["path"].removeprefix("realistic/") for e in entries[1:])
    assert '<link rel="icon" href="data:,">' in html          # no favicon request
    assert 'loading="lazy"' not in html
    css = (root / "realistic/css/style-1.css").read_text()
    assert css.count("@font-face") == 6                         # fonts are used, not only preloaded
    assert page_resources(entries)[0] == "/realistic/index.html"


def test_images_are_valid_pngs(pages):
    pytest.importorskip("PIL")
    from PIL import Image
    root, entries = pages["a"]
    for e in entries:
        if e["path"].endswith(".png"):
            with Image.open(root / e["path"]) as im:
                im.load()
                assert im.format == "PNG" and im.mode == "RGB"


def test_bodies_are_incompressible_or_text(pages):
    root, entries = pages["a"]
    hero = max((e for e in entries if e["path"].endswith(".png")), key=lambda e: e["size"])
    data = (root / hero["path"]).read_bytes()
    assert len(zlib.compress(data, 6)) > 0.98 * len(data)
    js = (root / "realistic/js/script-1.js").read_text()
    assert js.startswith("// quicbench realistic page")


@pytest.mark.parametrize("size", [MIN_PNG, MIN_PNG + 1, 1_000, 10_000, 100_000, 1_000_000, 10_000_000])
def test_noise_png_has_the_exact_size(size):
    data = noise_png(f"t/{size}", size)
    assert len(data) == size and data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data == noise_png(f"t/{size}", size) != noise_png(f"u/{size}", size)
    w, h = struct.unpack(">II", data[16:24])
    assert w >= 1 and h >= 1
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        assert im.size == (w, h)


def test_noise_png_too_small():
    with pytest.raises(ValueError, match="at least"):
        noise_png("x", MIN_PNG - 1)


def test_content_set_with_the_realistic_page(tmp_path):
    cs = generate({10_000: 2}, seed=4, cache=tmp_path, realistic_page=True)
    paths = {f["path"] for f in cs.manifest["files"]}
    assert "realistic/index.html" in paths and len([p for p in paths if p.startswith("realistic/")]) == 125
    assert (cs.root / "realistic/img").is_dir()
    assert 'href="realistic/index.html"' in (cs.root / "index.html").read_text()
