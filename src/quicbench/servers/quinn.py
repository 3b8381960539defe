"""quinn: HTTP/3 on a Rust QUIC stack (quinn + h3 + rustls), quicbench's own small file server.

``make setup`` builds h3server/ (pinned crates, Cargo.lock committed) into build/bin as
``quicbench-h3server``. It serves h3 only: one UDP listener, no TCP. The sender's loss detection
and congestion control are quinn's, so the row's ``server_stack`` names quinn, quinn-proto, h3
and rustls with their versions. Its congestion controller is set per run (``quic_cc``: cubic,
quinn's default; newreno; bbr), and the server says per connection which one it runs, in its
log and in its qlog's description. With a plan's ``qlog = true`` it writes one qlog per
connection (``--qlog-dir``), which run/recovery.py reads (quinn's qlog logs no acknowledgements:
see there for what is counted and how).
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any

from quicbench.errors import QuicbenchError
from quicbench.paths import bin_dir
from quicbench.servers.base import Server, listen_address

VERSION_RE = re.compile(r"^quicbench-h3server (\S+) \((.*)\)\s*$")


class QuinnServer(Server):
    name = "quinn"
    protocols = frozenset({"h3"})
    binary = "quicbench-h3server"
    version_args = ("--version",)
    quic_ccs = ("cubic", "newreno", "bbr")   # quinn-proto 0.11's controllers; cubic is its default
    install_hint = "run 'make setup' (builds h3server/ into build/bin)"

    @classmethod
    def executable(cls) -> str:
        local = bin_dir() / cls.binary
        if local.is_file() and os.access(local, os.X_OK):
            return str(local)
        raise QuicbenchError(f"missing binary '{local}': {cls.install_hint}")

    @classmethod
    def binary_facts(cls) -> dict[str, dict[str, Any]]:
        # built by quicbench (no Debian package); root: it binds port 443
        return {cls.binary: {"package": None, "root": True, "version_args": list(cls.version_args), "own": True}}

    def argv(self) -> list[str]:
        argv = [self.executable(), "--listen", listen_address(self.lab.address("server"), self.port),
                "--cert", str(self.tls.cert), "--key", str(self.tls.key), "--root", str(self.content.root),
                "--cc", self.quic_cc or self.quic_ccs[0]]
        for d in self.content.live_dirs:      # quicbench's own live/<key> links point there
            argv += ["--allow-dir", str(d)]
        if self.qlog_dir is not None:
            argv += ["--qlog-dir", str(self.qlog_dir)]
        return argv

    def enable_qlog(self) -> bool:
        """quinn's qlog, one file per connection, asked for by argument (not by environment)."""
        self.qlog_dir = self.workdir / "qlog"
        self.qlog_dir.mkdir(parents=True, exist_ok=True)
        return True

    @classmethod
    def version(cls) -> dict[str, str]:
        """The server's version and its stack's crates: 'quicbench-h3server 0.1.0 (quinn 0.11.12,
        quinn-proto 0.11.19, h3 0.0.8, h3-quinn 0.0.10, rustls 0.23.46)'."""
        out = cls._version_line()
        m = VERSION_RE.match(out)
        if not m:
            return {cls.name: out}
        versions = {"quicbench_h3server": m.group(1)}
        for part in m.group(2).split(","):
            crate, _, ver = part.strip().partition(" ")
            if crate and ver:
                versions[crate.replace("-", "_")] = ver
        return versions

    @classmethod
    def version_text(cls) -> str:
        m = VERSION_RE.match(cls._version_line())
        return m.group(1) if m else cls._version_line()

    @classmethod
    def _version_line(cls) -> str:
        try:
            cp = subprocess.run([cls.executable(), *cls.version_args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise QuicbenchError(f"{cls.binary} --version: {e}") from e
        return cp.stdout.strip()
