"""Servers serve a private copy of the content's own regular files (ContentSet.isolated)."""

import os

import pytest

from quicbench.content.objects import ContentSet, generate
from quicbench.errors import QuicbenchError


def _site(tmp_path):
    root = tmp_path / "site"
    (root / "d").mkdir(parents=True)
    (root / "a.txt").write_text("served\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the lab\n")
    return root, secret


def test_copy_holds_regular_files_only_and_ignores_later_links(tmp_path):
    root, secret = _site(tmp_path)
    (root / "d" / "inside").symlink_to(root / "a.txt")        # a link within the root: its file
    (root / "b.txt").write_text("b\n")
    os.link(root / "b.txt", root / "d" / "b2.txt")            # both names inside: fine
    served = ContentSet(root=root, manifest={}).isolated(tmp_path / "srv")
    assert served.private and served.origin == root
    files = {p.relative_to(served.root).as_posix(): p for p in served.root.rglob("*") if not p.is_dir()}
    assert set(files) == {"a.txt", "b.txt", "d/inside", "d/b2.txt"}
    assert not any(p.is_symlink() for p in files.values())
    assert files["d/inside"].read_text() == "served\n"
    # a copy, not the user's inode: their later hard links elsewhere do not reach it
    assert os.stat(files["a.txt"]).st_ino != os.stat(root / "a.txt").st_ino
    (root / "late").symlink_to(secret)
    os.link(secret, root / "late-hard")
    assert not (served.root / "late").exists() and not (served.root / "late-hard").exists()


@pytest.mark.parametrize("make, match", [
    (lambda root, secret: (root / "d" / "s").symlink_to(secret), r"d/s is a link to .*secret.txt, outside"),
    (lambda root, secret: (root / "d" / "s").symlink_to("/etc"), r"d/s is a link to /etc, outside"),
    (lambda root, secret: (root / "d" / "s").symlink_to(root / "d"), r"d/s is a link to .*, not a regular file"),
    (lambda root, secret: os.link(secret, root / "h"), r"h has 2 names, 1 of them outside the content directory"),
    (lambda root, secret: os.mkfifo(root / "f"), r"f is not a regular file or directory"),
])
def test_refused_before_anything_is_written(tmp_path, make, match):
    root, secret = _site(tmp_path)
    make(root, secret)
    with pytest.raises(QuicbenchError, match=match):
        ContentSet(root=root, manifest={}).isolated(tmp_path / "srv")
    assert not (tmp_path / "srv").exists()


def test_generated_set_is_hard_linked_and_its_own_links_pass(tmp_path):
    cs = generate({1000: 3}, cache=tmp_path / "cache")
    served = cs.isolated(tmp_path / "srv")
    a, b = served.root / "1KB" / "obj-1.bin", cs.root / "1KB" / "obj-3.bin"
    assert os.stat(a).st_ino == os.stat(b).st_ino          # no copy of the cache's bytes
    assert (served.root / "manifest.json").is_file()
    # a second copy (another run) meanwhile: the cache's files have more names, still its own
    cs.isolated(tmp_path / "srv2")
    cs.check_served_files()
    # a file of the manifest replaced by a hard link to another file: refused (size differs)
    target = cs.root / "1KB" / "obj-2.bin"
    target.unlink()
    secret = tmp_path / "secret"
    secret.write_text("x")
    os.link(secret, target)
    with pytest.raises(QuicbenchError, match=r"1KB/obj-2.bin has 2 names"):
        cs.isolated(tmp_path / "srv3")
