"""The content generator (Go-Quick's testGen): objects, copies, index pages, a manifest.

Objects are incompressible and deterministic: the bytes of an object of size S made with
seed K are SHAKE-256("quicbench-content/K/S") truncated to S. The N copies of one object
are hard links to one file (no extra disk), each listed in the manifest. ``index{n}.html``
embeds the first n copies as images, as Go-Quick's pages did for Chrome. Content sets are
cached under ``~/.cache/quicbench/content/<key>/`` by their parameters.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from quicbench.errors import QuicbenchError
from quicbench.paths import cache_dir, publish_cache_dir
from quicbench.model.units import size_label

GENERATOR = "quicbench-content/2"
# Go-Quick's page sizes (getFiles, appendix C): index{n}.html for these n that fit.
INDEX_COUNTS = (1, 2, 4, 8, 10, 15, 20, 30, 40, 50, 60, 80, 100, 200, 500, 1000)
CHUNK = 1 << 22


@dataclass(frozen=True)
class ContentSet:
    root: Path
    manifest: dict

    def path_template(self, size: int) -> str:
        return f"/{size_label(size)}/obj-{{i}}.bin"

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    @property
    def live_dirs(self) -> list[Path]:
        """The live publishers' directories, which the set's own ``live/<key>`` links point into."""
        return [Path(v["live_dir"]) for v in self.manifest.get("videos", {}).values()]

    def check_served_files(self) -> None:
        """Servers serve regular files under the root only. A symbolic link that leaves the root
        (``ln -s /etc/shadow DIR/s``) or a special file (FIFO, device, socket) is refused before
        a server starts; links within the root, and quicbench's own links to its live
        publishers, are fine. Server configurations refuse links too where the server can
        (docs/servers.md), so a link made after the start is not followed either."""
        root = self.root.resolve()
        allowed = [root, *(d.resolve() for d in self.live_dirs)]
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in (*dirnames, *filenames):
                p = Path(dirpath) / name
                rel = p.relative_to(root)
                if p.is_symlink():
                    target = p.resolve()
                    if not any(target == a or target.is_relative_to(a) for a in allowed):
                        raise QuicbenchError(
                            f"content {self.root}: {rel} is a link to {target}, outside the content directory; "
                            f"servers serve only files under it: remove the link or copy the file in")
                elif not (p.is_dir() or p.is_file()):
                    raise QuicbenchError(f"content {self.root}: {rel} is not a regular file or directory "
                                         f"(a FIFO, socket or device); servers serve only regular files")


def object_bytes_iter(seed: int, size: int):
    """Yield the object's bytes in chunks.

    Objects of 84 bytes and more are valid PNG images of noise (SHAKE-256 pixels in stored
    deflate blocks, exactly `size` bytes): incompressible, and decodable, so a browser
    downloads them in full (Chromium stops downloading an <img> it cannot decode), as
    Go-Quick's test images were real JPEGs. Smaller objects are raw SHAKE-256 bytes.
    """
    from quicbench.content.page import MIN_PNG, noise_png_iter
    if size >= MIN_PNG:
        yield from noise_png_iter(f"quicbench-content/{seed}/{size}", size)
        return
    # hashlib's shake only returns a full digest, so derive fixed chunks from per-chunk keys
    for off in range(0, size, CHUNK):
        n = min(CHUNK, size - off)
        yield hashlib.shake_256(f"quicbench-content/{seed}/{size}/{off}".encode()).digest(n)  # < 84 bytes


def content_key(seed: int, objects: dict[int, int], realistic_page: bool = False,
                videos: tuple[str, ...] = (), archives: tuple[str, ...] = ()) -> str:
    params: dict = {"generator": GENERATOR, "seed": seed, "objects": sorted(objects.items())}
    if archives:
        params["archives"] = sorted(archives)
    if realistic_page:
        params["realistic_page"] = True
    if videos:
        params["videos"] = sorted(videos)
    return hashlib.sha256(json.dumps(params).encode()).hexdigest()[:16]


def live_dir(cache: Path, key: str) -> Path:
    """Where the live publisher of video `key` writes (served as /live/<key>/ through a link)."""
    return cache / "live" / key


def _index_page(label: str, n: int) -> str:
    imgs = "\n".join(f'<img src="obj-{i}.bin" width="32" height="32" alt="{i}">' for i in range(1, n + 1))
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{label} x {n}</title></head>\n"
            f"<body><h1>{n} objects of {label}</h1>\n{imgs}\n</body></html>\n")


def generate(objects: dict[int, int], seed: int = 1, cache: Path | None = None,
             realistic_page: bool = False, videos=(), archives=()) -> ContentSet:
    """Make (or reuse) a content set with `count` copies of an object of each `size`.

    objects maps size in bytes -> number of copies (>= 1). realistic_page adds
    `realistic/index.html` and its resources (see content_page.py). videos (VideoSpecs) adds
    `player/` (player.html, hls.js, dash.js), each ladder under `video/<key>/` (hard links to
    the video cache) and `live/<key>`, a link to the directory its live publisher writes.
    archives (HAR paths) adds each page archive under `replay/<key>/` for the replay server.
    """
    from quicbench.content.replay import archive_key, write_replay
    from quicbench.content.video import install_player, make_vod
    from quicbench.model.har import read_archive
    archs = [read_archive(a) for a in archives]             # checked first: may raise
    vsets = [make_vod(v, cache=cache) for v in videos]     # encoded (or cached) first: may raise
    for size, count in objects.items():
        if size < 1:
            raise QuicbenchError(f"bad object size {size}: must be at least 1 byte")
        if count < 1:
            raise QuicbenchError(f"bad count {count} for {size_label(size)} objects: must be at least 1")
    base = (cache or cache_dir()) / "content"
    root = base / content_key(seed, objects, realistic_page, tuple(v.key for v in vsets),
                              tuple(a.digest for a in archs))
    manifest_file = root / "manifest.json"
    if manifest_file.exists():
        return ContentSet(root=root, manifest=json.loads(manifest_file.read_text()))
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))
    try:
        files = []
        listing = []
        for size, count in sorted(objects.items()):
            label = size_label(size)
            d = tmp / label
            d.mkdir()
            first = d / "obj-1.bin"
            h = hashlib.sha256()
            with open(first, "wb") as f:
                for chunk in object_bytes_iter(seed, size):
                    h.update(chunk)
                    f.write(chunk)
            digest = h.hexdigest()
            for i in range(1, count + 1):
                if i > 1:
                    os.link(first, d / f"obj-{i}.bin")
                files.append({"path": f"{label}/obj-{i}.bin", "size": size, "sha256": digest})
            pages = sorted({n for n in INDEX_COUNTS if n <= count} | {count})
            for n in pages:
                page = _index_page(label, n)
                (d / f"index{n}.html").write_text(page)
                files.append({"path": f"{label}/index{n}.html", "size": len(page.encode()),
                              "sha256": hashlib.sha256(page.encode()).hexdigest()})
            listing.append(f'<li>{html.escape(label)}: {count} objects; pages '
                           + " ".join(f'<a href="{label}/index{n}.html">{n}</a>' for n in pages) + "</li>")
        if realistic_page:
            from quicbench.content.page import make_realistic_page
            files += make_realistic_page(tmp / "realistic", seed)
            listing.append('<li><a href="realistic/index.html">realistic page</a></li>')
        for a in archs:
            files += write_replay(a, tmp / "replay" / archive_key(a))
            listing.append(f'<li>page archive {html.escape(os.path.basename(a.source))}: {html.escape(a.page_url)}</li>')
        video_info = {}
        for vs in vsets:
            d = tmp / "video" / vs.key
            d.mkdir(parents=True)
            for f in vs.manifest["files"]:
                try:
                    os.link(vs.root / f["path"], d / f["path"])
                except OSError:
                    shutil.copyfile(vs.root / f["path"], d / f["path"])
                files.append({**f, "path": f"video/{vs.key}/{f['path']}"})
            live = live_dir(base.parent, vs.key)
            (tmp / "live").mkdir(exist_ok=True)
            os.symlink(live, tmp / "live" / vs.key)
            video_info[vs.key] = {"vod": str(vs.root), "live_dir": str(live), "segments": vs.manifest["segments"],
                                  "spec": vs.manifest["spec"], "streams": vs.manifest["streams"]}
            listing.append(f'<li>video {vs.key}: <a href="player/player.html?player=hls&src=/video/{vs.key}/'
                           f'master.m3u8">HLS</a> <a href="player/player.html?player=dashjs&src=/video/{vs.key}/'
                           f'manifest.mpd">DASH</a></li>')
        if vsets:
            files += install_player(tmp / "player")
        (tmp / "index.html").write_text(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>quicbench content</title></head>"
            "<body><h1>quicbench content</h1><ul>\n" + "\n".join(listing) + "\n</ul></body></html>\n")
        manifest = {"generator": GENERATOR, "seed": seed,
                    "objects": {str(s): c for s, c in sorted(objects.items())}, "files": files}
        if video_info:
            manifest["videos"] = video_info
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        publish_cache_dir(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ContentSet(root=root, manifest=json.loads(manifest_file.read_text()))
