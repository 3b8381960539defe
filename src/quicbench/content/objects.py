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
import re
import shutil
import stat
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
    private: bool = False      # a server's own copy (``isolated``): served as it is
    origin: Path | None = None  # the copy's content directory (the cache's or yours)

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
        """Refuse, before anything starts, a content directory that holds anything but its own
        regular files (``served_entries`` says what); nothing is written."""
        self.served_entries()

    def served_entries(self) -> list[tuple[str, os.stat_result, Path]]:
        """(relative path, lstat of the file served, its path) for every file a server may serve.

        Only regular files on the content's own file system are served. Refused, naming the
        path: a symbolic link that leaves the root (``ln -s /etc/shadow DIR/s``) or points to a
        directory; a special file (FIFO, socket, device); a mount point or a file of another file
        system inside the root (a bind mount); a regular file with more names (hard links) than
        the root holds (``ln /etc/shadow DIR/h``) -- unless the set is quicbench's generated one
        and the manifest lists the file at its size (its copies are hard links to one file, its
        video segments hard links to the video cache). A link to a regular file inside the root
        serves that file; quicbench's own ``live/<key>`` links are served from a private
        directory instead (``isolated``)."""
        root = self.root
        try:
            rst = os.stat(root)
        except OSError as e:
            raise QuicbenchError(f"content {root}: {e.strerror}") from None
        if not stat.S_ISDIR(rst.st_mode):
            raise QuicbenchError(f"content {root}: not a directory")
        for m in _mount_points_under(root):
            raise QuicbenchError(f"content {root}: {m.relative_to(root.resolve())} is a mount point (a bind mount); "
                                 f"servers serve only the content directory's own files: unmount it")
        listed = {f["path"]: f.get("size") for f in self.manifest.get("files", []) if isinstance(f, dict)}
        own_live = {f"live/{k}" for k in self.manifest.get("videos", {})}
        entries: list[tuple[str, os.stat_result, Path]] = []
        links: list[tuple[str, Path]] = []
        names: dict[tuple[int, int], int] = {}
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in (*dirnames, *filenames):
                p = Path(dirpath) / name
                rel = p.relative_to(root).as_posix()
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    if rel not in own_live:
                        links.append((rel, p))
                elif st.st_dev != rst.st_dev:
                    raise QuicbenchError(f"content {root}: {rel} is on another file system (a mount point or "
                                         f"bind mount); servers serve only the content directory's own files")
                elif stat.S_ISREG(st.st_mode):
                    entries.append((rel, st, p))
                    names[(st.st_dev, st.st_ino)] = names.get((st.st_dev, st.st_ino), 0) + 1
                elif not stat.S_ISDIR(st.st_mode):
                    raise QuicbenchError(f"content {root}: {rel} is not a regular file or directory "
                                         f"(a FIFO, socket or device); servers serve only regular files")
        for rel, st, _ in entries:
            if st.st_nlink > names[(st.st_dev, st.st_ino)] and not (rel in listed and listed[rel] == st.st_size):
                raise QuicbenchError(
                    f"content {root}: {rel} has {st.st_nlink} names, {st.st_nlink - names[(st.st_dev, st.st_ino)]} "
                    f"of them outside the content directory (a hard link); servers serve only files whose every "
                    f"name is in it: copy the file in")
        resolved_root = root.resolve()
        by_path = {p.resolve(): (st, p) for _, st, p in entries}
        for rel, p in links:
            target = p.resolve()
            if not (target == resolved_root or target.is_relative_to(resolved_root)):
                raise QuicbenchError(
                    f"content {root}: {rel} is a link to {target}, outside the content directory; "
                    f"servers serve only files under it: remove the link or copy the file in")
            if target not in by_path:
                raise QuicbenchError(f"content {root}: {rel} is a link to {target}, not a regular file; servers "
                                     f"serve only regular files and directories: remove the link")
            entries.append((rel, *by_path[target]))
        return entries

    def isolated(self, dest: Path) -> "ContentSet":
        """A private copy of the served files at ``dest`` (made anew), which servers serve instead
        of the root: a link or a mount made in the root after this is never seen by a server.
        Regular files only, no links, no other file system (``served_entries``). The files of a
        generated set that its manifest lists are hard links to the cache's (no disk, no time); other
        files are copied
        (a hard link would share its inode with a file its owner may still link elsewhere).
        Each file is checked after it is placed to be the one checked before (a swap in between
        is refused). ``live/<key>`` of each video is an empty directory the live publisher
        writes into (the manifest's ``live_dir`` names it)."""
        entries = self.served_entries()
        # the generated set's listed files are hard-linked (they may have names in other copies)
        listed = {f["path"]: f.get("size") for f in self.manifest.get("files", []) if isinstance(f, dict)}
        if dest.exists() or dest.is_symlink():
            shutil.rmtree(dest) if dest.is_dir() and not dest.is_symlink() else dest.unlink()
        dest.mkdir(parents=True)
        os.chmod(dest, 0o755)
        made: dict[tuple[int, int], Path] = {}
        try:
            for rel, st, src in entries:
                out = dest / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                key = (st.st_dev, st.st_ino)
                if key in made:
                    os.link(made[key], out)
                    continue
                if not (listed.get(rel) == st.st_size and _link_same(src, out, key)):
                    _copy_same(src, out, key, self.root / rel)
                    os.chmod(out, 0o644)      # readable by a server that runs as nobody (the cache's are)
                made[key] = out
            manifest = json.loads(json.dumps(self.manifest))
            for k, v in manifest.get("videos", {}).items():
                live = dest / "live" / k
                live.mkdir(parents=True, exist_ok=True)
                v["live_dir"] = str(live)
            for d in [dest, *(p for p in dest.rglob("*") if p.is_dir())]:
                os.chmod(d, 0o755)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
        return ContentSet(root=dest, manifest=manifest, private=True, origin=self.origin or self.root)


def _mount_points_under(root: Path) -> list[Path]:
    """The mount points strictly inside root (/proc/self/mountinfo: a bind mount of the same file
    system keeps its device number, so only the mount table tells)."""
    top = root.resolve()
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        point = Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
        if point != top and point.is_relative_to(top):
            out.append(point)
    return out


def _link_same(src: Path, out: Path, key: tuple[int, int]) -> bool:
    """Hard-link src at out if it is still the file checked (dev, inode); False: not linkable."""
    try:
        os.link(src, out, follow_symlinks=False)
    except OSError:
        return False
    st = os.lstat(out)
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != key:
        out.unlink()
        raise QuicbenchError(f"content: {src} changed while it was checked; not served")
    return True


def _copy_same(src: Path, out: Path, key: tuple[int, int], shown: Path) -> None:
    """Copy src to out through a descriptor opened without following links, if it is still the
    file checked (dev, inode)."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise QuicbenchError(f"content: {shown}: {e.strerror}; not served") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != key:
            raise QuicbenchError(f"content: {shown} changed while it was checked; not served")
        with open(fd, "rb", closefd=False) as f, open(out, "xb") as g:
            shutil.copyfileobj(f, g, CHUNK)
    finally:
        os.close(fd)


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


def check_disk_space(objects: dict[int, int], seed: int = 1, realistic_page: bool = False, videos=(),
                     cache: Path | None = None) -> None:
    """Refuse (before anything starts) a content set the cache's file system has no room for: each
    size is one file (its copies are hard links), plus a margin of 1 GB for the run's own files."""
    base = (cache or cache_dir()) / "content"
    if (base / content_key(seed, objects, realistic_page, tuple(v.key for v in videos)) / "manifest.json").exists():
        return
    need = sum(objects) + (1 << 30)
    probe = base
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if need > free:
        raise QuicbenchError(f"workloads: the content needs {size_label(need)} in {base} (its objects once each, "
                             f"and 1GB for the run), but {size_label(free)} is free; use smaller sizes or free space")


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
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-", dir=base))
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
