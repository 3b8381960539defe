"""issue 45 part 1: nothing outside the content is served, by any of the five servers, whatever
appears in the content directory after the start: a symbolic link, a hard link, a bind mount.
One lab and one start of each server for the whole module (seconds)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import root_only
from quicbench.clients import LoadClient
from quicbench.content.objects import ContentSet
from quicbench.errors import QuicbenchError
from quicbench.lab import LabSpec, make_lab
from quicbench.servers import SERVERS
from quicbench.tls import make_tls

pytestmark = [pytest.mark.integration, pytest.mark.parallel_safe, root_only]

# server -> (port, protocol fetched)
SERVED = {"caddy": (443, "h1"), "nginx": (1443, "h1"), "apache": (2443, "h2"), "ngtcp2": (3443, "h3"),
          "quinn": (4443, "h3")}
SECRET = "not for the lab\n"


def _get(lab, tls, port: int, proto: str, path: str, out: Path) -> tuple[int | None, int | None]:
    """(status, bytes) of one GET from the client node (qb-load, no manifest: any body)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(lab.cmd("client", [LoadClient.executable(), "--proto", proto,
                                      "--base-url", f"https://{tls.hostname}", "--connect",
                                      f"{lab.address('server')}:{port}", "--ca", str(tls.ca_cert),
                                      "--path-template", path, "--requests", str(out), "--timeout", "5s"]),
                   capture_output=True, timeout=20)
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return (rows[0].get("status"), rows[0].get("bytes")) if rows else (None, None)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    wd = tmp_path_factory.mktemp("iso")
    outside = wd / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text(SECRET)
    site = wd / "site"
    (site / "d").mkdir(parents=True)
    (site / "a.txt").write_text("served\n")
    started, mounted = [], []
    with make_lab(LabSpec(name="t-iso")) as lab:
        tls = make_tls(wd / "tls", ips=[lab.address("server")])
        try:
            for name, (port, _) in SERVED.items():
                if not SERVERS[name].available()[0]:
                    continue                    # its test says so (skipped)
                srv = SERVERS[name](lab, wd / "run" / name, ContentSet(root=site, manifest={}), tls, port=port)
                srv.start()
                started.append(srv)
            # made after every server started: a symbolic link, a hard link and a bind mount
            (site / "late-sym").symlink_to(secret)
            os.link(secret, site / "late-hard")
            subprocess.run(["mount", "--bind", str(outside), str(site / "d")], check=True)
            mounted.append(site / "d")
            yield lab, tls, wd, site, secret
        finally:
            for m in mounted:
                subprocess.run(["umount", str(m)], check=False)
            for srv in started:
                srv.stop()


@pytest.mark.parametrize("server", SERVED)
def test_serves_its_copy_and_nothing_made_after_the_start(world, server):
    lab, tls, wd, _, _ = world
    ok, why = SERVERS[server].available()
    if not ok:
        pytest.skip(why)
    port, proto = SERVED[server]
    out = wd / "get" / server
    assert _get(lab, tls, port, proto, "/a.txt", out / "a.jsonl") == (200, len("served\n"))
    for path in ("/late-sym", "/late-hard", "/d/secret.txt"):
        status, size = _get(lab, tls, port, proto, path, out / (path.strip("/").replace("/", "_") + ".jsonl"))
        assert status != 200 and size != len(SECRET), f"{server} served {path}: {status}, {size} bytes"


def test_links_and_mounts_present_at_the_start_are_refused(world):
    """The same three, present when a server would start: refused, naming them; nothing written."""
    lab, tls, wd, site, secret = world
    cases = {"late-sym": r"late-sym is a link to .*secret.txt, outside the content directory",
             "late-hard": r"late-hard has 2 names, 1 of them outside the content directory",
             "d": r"d is a mount point \(a bind mount\)"}
    for i, (name, match) in enumerate(cases.items()):
        for other in set(cases) - {name}:
            if other == "d":
                subprocess.run(["umount", str(site / "d")], check=False)
            else:
                (site / other).rename(wd / f"aside-{other}")
        try:
            srv = SERVERS["nginx"](lab, wd / "refused" / name, ContentSet(root=site, manifest={}), tls, port=5443 + i)
            with pytest.raises(QuicbenchError, match=match):
                srv.start()
            assert srv.pid is None and not (wd / "refused" / name).exists()
        finally:
            for other in set(cases) - {name}:
                if other == "d":
                    subprocess.run(["mount", "--bind", str(secret.parent), str(site / "d")], check=True)
                else:
                    (wd / f"aside-{other}").rename(site / other)
