import hashlib
import json

import pytest

from quicbench.content.objects import generate, object_bytes_iter
from quicbench.errors import QuicbenchError
from quicbench.model.units import parse_size, size_label


@pytest.mark.parametrize("text,n", [("10KB", 10_000), ("100KB", 100_000), ("1MB", 1_000_000),
                                     ("10MB", 10_000_000), ("33.6MB", 33_600_000), ("1MiB", 1_048_576),
                                     ("512", 512), ("2 kib", 2048), ("1GB", 10**9)])
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("bad", ["", "ten", "10XB", "-5KB", "0", "0.0001B", "1e3"])
def test_parse_size_rejects(bad):
    with pytest.raises(QuicbenchError, match="bad size"):
        parse_size(bad)


@pytest.mark.parametrize("n", [10_000, 100_000, 33_600_000, 1_048_576, 1234, 1])
def test_size_label_round_trips(n):
    assert parse_size(size_label(n)) == n


def test_content_deterministic_incompressible_and_manifest(tmp_path):
    a = generate({10_000: 3, 100_000: 2}, seed=7, cache=tmp_path / "a")
    b = generate({10_000: 3, 100_000: 2}, seed=7, cache=tmp_path / "b")
    c = generate({10_000: 3, 100_000: 2}, seed=8, cache=tmp_path / "c")
    obj_a = (a.root / "10KB" / "obj-1.bin").read_bytes()
    assert obj_a == (b.root / "10KB" / "obj-1.bin").read_bytes()
    assert obj_a != (c.root / "10KB" / "obj-1.bin").read_bytes()
    assert len(obj_a) == 10_000
    import zlib
    assert len(zlib.compress(obj_a, 9)) > 0.99 * len(obj_a)  # incompressible
    files = {f["path"]: f for f in a.manifest["files"]}
    for i in (1, 2, 3):
        f = files[f"10KB/obj-{i}.bin"]
        data = (a.root / f["path"]).read_bytes()
        assert f["size"] == len(data) and f["sha256"] == hashlib.sha256(data).hexdigest()
    assert "100KB/obj-3.bin" not in files
    # pages: index1, index2 (and index{count}) embed the first n objects as images
    page = (a.root / "10KB" / "index3.html").read_text()
    assert page.count("<img ") == 3 and 'src="obj-3.bin"' in page
    assert (a.root / "index.html").exists()
    assert json.loads((a.root / "manifest.json").read_text()) == a.manifest


def test_content_cached_by_parameters(tmp_path):
    a = generate({1000: 2}, seed=1, cache=tmp_path)
    mtime = (a.root / "manifest.json").stat().st_mtime_ns
    again = generate({1000: 2}, seed=1, cache=tmp_path)
    assert again.root == a.root and (a.root / "manifest.json").stat().st_mtime_ns == mtime
    other = generate({1000: 3}, seed=1, cache=tmp_path)
    assert other.root != a.root


def test_large_object_streams_in_chunks():
    size = 5 * (1 << 22) + 17
    total = sum(len(c) for c in object_bytes_iter(1, size))
    assert total == size


def test_content_rejects_bad_count(tmp_path):
    with pytest.raises(QuicbenchError, match="bad count 0"):
        generate({1000: 0}, cache=tmp_path)
