"""quinn: HTTP/3 on a Rust QUIC stack (quinn + h3 + rustls), quicbench's own small file server.

``make quinn`` (and ``make setup-all``) builds h3server/ (pinned crates, Cargo.lock committed) into build/bin as
``quicbench-h3server``. It serves h3 only: one UDP listener, no TCP. The sender's loss detection
and congestion control are quinn's, so the row's ``server_stack`` names quinn, quinn-proto, h3
and rustls with their versions. Its congestion controller is set per run (the plan's
``quic_cc``: cubic, quinn's default; reno, quinn's NewReno; bbr), and the server says per
connection which one quinn runs for it, read back from quinn, in a log line (and the one asked
for in its qlog's description). With a plan's ``qlog = true`` it writes one qlog per connection
(``--qlog-dir``), which run/recovery.py reads (quinn's qlog logs no acknowledgements: see there
for what is counted and how), and each trial's ``quic_cc_seen`` comes from the log lines of the
trial's connections.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from quicbench.errors import QuicbenchError
from quicbench.servers.base import BuiltServer, cc_from_log, listen_address

VERSION_RE = re.compile(r"^quicbench-h3server (\S+) \((.*)\)\s*$")
# one line per connection in the server's log: the controller quinn runs for it
CC_LINE = re.compile(r"^connection ([0-9a-f]+) from \S+: congestion control (\S+)$")


class QuinnServer(BuiltServer):
    name = "quinn"
    provisions = ("quinn",)
    protocols = frozenset({"h3"})
    binary = "quicbench-h3server"
    version_args = ("--version",)
    qlog_option = "--qlog-dir"
    quic_stack = "quinn"
    # quinn-proto 0.11's controllers, cubic its default; 'reno' is its NewReno (as ngtcp2's and
    # quic-go's are named here)
    quic_ccs = ("cubic", "reno", "bbr")
    install_hint = "run 'make quinn' (builds h3server/ into build/bin)"

    def argv(self) -> list[str]:
        argv = [self.executable(), "--listen", listen_address(self.lab.address("server"), self.port),
                "--cert", str(self.tls.cert), "--key", str(self.tls.key), "--root", str(self.content.root),
                "--cc", self.sender_cc or self.quic_ccs[0], *self.qlog_args()]
        return argv

    def reported_cc(self, qlogs: list[Path], trial_dir: Path) -> str | None:
        """The congestion controller quinn ran for the trial's connections: the server's log line
        of each (read back from quinn), found by the original destination connection ID that
        names its qlog (``<odcid>_server.sqlog``). The lines are kept in trial_dir/server-cc.log.
        None without qlogs or lines; several controllers (never expected) are all named."""
        return cc_from_log(self.workdir / f"{self.name}.log", {p.name.split("_", 1)[0] for p in qlogs}, CC_LINE,
                           trial_dir)

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
