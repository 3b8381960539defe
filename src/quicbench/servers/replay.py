"""replay: recorded page archives over HTTP/1.1, HTTP/2 and HTTP/3 (``qb-replay``, Go).

A plan's page workloads with ``har = "PATH"`` put their archives into the content set
(``replay/<key>/``, content/replay.py); this server serves every one of them, each origin under
its own name with its own certificate (tls.origin_certificates), on every port the archives'
origins use and the lab's port, with the recorded status, headers and body. Requests are
matched as web-page-replay matches them (method, host, path, query; the closest query when a
cache-busting value changed); a miss gets 404 and ``X-Qb-Replay: miss``, which the browser
client counts (``replay_missed``). Other hosts (the lab's own name) get the content set's
files, so gallery and realistic pages load from it too. quic-go's http3 is its HTTP/3 stack.
``make replay`` builds it from loadclient/ (cmd/qb-replay) on first use (``make setup-all``: with the
rest). docs/pages.md.
"""

from __future__ import annotations

import json
import re

from quicbench.proc import run
from quicbench.servers.base import BuiltServer
from quicbench.tls import origin_certificates


def archive_origins(root) -> list[tuple[str, int]]:
    """(host, port) of every origin of the archives under a content root's replay/."""
    out = set()
    for idx in sorted((root / "replay").glob("*/index.json")):
        for e in json.loads(idx.read_text()).get("entries", []):
            out.add((e["host"], int(e["port"])))
    return sorted(out)


class ReplayServer(BuiltServer):
    name = "replay"
    protocols = frozenset({"h1", "h2", "h3"})
    binary = "qb-replay"
    quic_stack = "quic-go"         # its h3 is quic-go's http3
    version_args = ("--version",)
    quic_cc_builtin = "reno"       # quic-go's one sender (as Caddy's)
    install_hint = "run 'make replay' (builds loadclient/cmd/qb-replay into build/bin)"
    provisions = ("replay",)

    def argv(self) -> list[str]:
        origins = archive_origins(self.content.root)
        hosts = sorted({h for h, _ in origins} | {self.tls.hostname})
        certs = origin_certificates(self.tls, hosts, self.workdir / "origin-certs")
        argv = [self.executable(), "--listen", self.lab.address("server"), "--root", str(self.content.root),
                "--key", str(self.tls.key), "--port", str(self.port)]
        for c in certs:
            argv += ["--cert", str(c)]
        return argv

    def ready(self) -> bool:
        """TCP and UDP listening on every port it serves (the lab's and each origin's)."""
        ports = {self.port} | {p for _, p in archive_origins(self.content.root)}
        cp = run(self.lab.cmd("server", ["ss", "-Hln", "-tu"]), check=False)
        seen = {(line.split()[0], line.split()[4].rsplit(":", 1)[-1]) for line in cp.stdout.splitlines()
                if len(line.split()) >= 5}
        return all((kind, str(p)) in seen for p in ports for kind in ("tcp", "udp"))

    @classmethod
    def version(cls) -> dict[str, str]:
        """qb-replay's version, and the quic-go and Go it was built with."""
        out = {"qb_replay": cls.version_text()}
        info = run(["go", "version", "-m", cls.executable()], check=False).stdout
        m = re.search(r"^\s*dep\s+github\.com/quic-go/quic-go\s+(\S+)", info, re.M)
        if m:
            out["quic_go"] = m.group(1)
        m = re.search(r":\s*(go\S+)", info)
        if m:
            out["go"] = m.group(1)
        return out

    @classmethod
    def version_text(cls) -> str:
        out = run([cls.executable(), "--version"], check=False).stdout.strip()
        return out.removeprefix("qb-replay ").strip() or "unknown"
