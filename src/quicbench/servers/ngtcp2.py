"""ngtcp2: the HTTP/3 example server of ngtcp2 + nghttp3 (GnuTLS), Debian's ``ngtcp2-server``.

bookworm has ngtcp2 0.12; ``make setup`` installs 1.11 from bookworm-backports
(scripts/install-deps.sh). The package ships the server as ``/usr/sbin/gtlsserver`` (the GnuTLS
build of ngtcp2's examples/server): h3 only, UDP only. It serves the files under ``-d DIR``
(``/`` and ``DIR/`` answer ``index.html``; a directory answers 308 to ``DIR/``, never a
listing; ``..`` is resolved away; Content-Type from /etc/mime.types) and sets no cache headers
(it has no option for them: its responses lack Go-Quick's no-cache headers). It *follows*
symbolic links, also out of its root, so it serves, as every server, a private copy of the
content with no links (``ContentSet.isolated``). It reads the content and never writes it.

Its congestion controller is a command-line choice (``--cc=cubic|reno|bbr``, default cubic):
the plan's ``quic_cc``. Its qlog (``--qlog-dir``, one ``<server SCID>.sqlog`` per connection,
qlog 0.3 JSON-SEQ) has ``transport:packet_sent``, ``transport:packet_received``,
``recovery:packet_lost`` (no trigger) and ``recovery:metrics_updated``, but names no congestion
controller. Its own debug log does, on every acknowledgement (``cca`` lines: ``bbr enter
Startup``, cubic's ``N bytes acked, slow start`` / ``cubic-ca``, reno's ``pkn=N acked, slow
start``), so with the plan's ``verify_cc = true`` the server also writes that log (without
packet dumps; its qlog is on too: the connection IDs come from it) and each trial's sender
congestion controller is read from it. A line per acknowledgement costs the sender CPU (about
4x a quiet sender on loopback), so it is off unless asked for: a measurement run leaves it off and
a short run with it shows that the stack honours the choice.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from quicbench.endpoints.debian import ngtcp2_stack
from quicbench.errors import QuicbenchError
from quicbench.servers.base import Server

SERVER_BINARY = "/usr/sbin/gtlsserver"
PACKAGE = "ngtcp2-server"
INSTALL_HINT = ("run 'make ngtcp2' (installs ngtcp2-server 1.11 from bookworm-backports; "
                "or: apt-get install -t bookworm-backports ngtcp2-server)")

# the debug log's congestion controller lines: "I00000007 0x<scid> cca <message>"
CCA_LINE = re.compile(r"^I\d+ 0x([0-9a-f]+) cca (.*)$")
CCA_SIGNS = (("bbr", re.compile(r"^bbr ")),
             ("cubic", re.compile(r"^\d+ bytes acked, (slow start|cubic-ca) ")),
             ("reno", re.compile(r"^pkn=\d+ acked, ")))
KEEP_CCA_LINES = 20           # per connection, copied into the trial's directory


class Ngtcp2Server(Server):
    name = "ngtcp2"
    provisions = ("ngtcp2",)
    protocols = frozenset({"h3"})
    binary = "gtlsserver"
    package = PACKAGE
    install_hint = INSTALL_HINT
    version_args = ("--help",)       # it has no version option; the package says the version
    qlog_option = "--qlog-dir"
    quic_ccs = ("cubic", "reno", "bbr")
    quic_stack = "ngtcp2"

    @classmethod
    def executable(cls) -> str:
        if os.access(SERVER_BINARY, os.X_OK):
            return SERVER_BINARY
        found = shutil.which(cls.binary)
        if found:
            return found
        raise QuicbenchError(f"missing binary '{SERVER_BINARY}': {cls.install_hint}")

    @classmethod
    def binary_facts(cls) -> dict[str, Any]:
        # bookworm's own ngtcp2 is 0.12: a host installs 1.11 from bookworm-backports, as this one does
        return {b: {**f, "release": "bookworm-backports"} for b, f in super().binary_facts().items()}

    @classmethod
    def version(cls) -> dict[str, str]:
        return ngtcp2_stack(PACKAGE)

    @classmethod
    def version_text(cls) -> str:
        v = ngtcp2_stack(PACKAGE).get("ngtcp2")
        if not v:
            raise QuicbenchError(f"package {PACKAGE} is not installed: {INSTALL_HINT}")
        return v

    @property
    def stack_log(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def argv(self) -> list[str]:
        # with verify_cc, its debug log (no packet or body dumps) names the congestion controller
        verbosity = ["--no-quic-dump", "--no-http-dump"] if self.cc_log else ["-q"]
        return [self.executable(), *verbosity, "-d", str(self.content.root), f"--cc={self.sender_cc}",
                *self.qlog_args(), self.lab.address("server"), str(self.port), str(self.tls.key), str(self.tls.cert)]

    def reported_cc(self, qlogs: list[Path], trial_dir: Path) -> str | None:
        """The congestion controller named by the debug log's ``cca`` lines of the trial's
        connections (their server connection IDs are the qlog files' names). The lines are kept
        in trial_dir/server-cc.log; the log is emptied for the next trial (the server appends)."""
        if not self.cc_log or self.qlog_dir is None or not self.stack_log.is_file():
            return None
        conns = {p.stem.lower() for p in qlogs}
        text = self.stack_log.read_text(errors="replace")
        os.truncate(self.stack_log, 0)     # the server writes with O_APPEND: it goes on at the new end
        kept: dict[str, list[str]] = {}
        seen: set[str] = set()
        for line in text.splitlines():
            m = CCA_LINE.match(line)
            if not m or m.group(1) not in conns:
                continue
            lines = kept.setdefault(m.group(1), [])
            if len(lines) < KEEP_CCA_LINES:
                lines.append(line)
            for cc, sign in CCA_SIGNS:
                if sign.match(m.group(2)):
                    seen.add(cc)
        if kept:
            (trial_dir / "server-cc.log").write_text("".join(l + "\n" for ls in kept.values() for l in ls))
        return "+".join(sorted(seen)) or None
