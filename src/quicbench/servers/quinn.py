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
from pathlib import Path

from quicbench.servers.base import RustServer, cc_from_log

# one line per connection in the server's log: the controller quinn runs for it
CC_LINE = re.compile(r"^connection ([0-9a-f]+) from \S+: congestion control (\S+)$")


class QuinnServer(RustServer):
    name = "quinn"
    provisions = ("quinn",)
    protocols = frozenset({"h3"})
    binary = "quicbench-h3server"
    version_args = ("--version",)
    qlog_option = "--qlog-dir"
    quic_stack = "quinn"
    quic_blocked_frames = False    # quinn-proto 0.11 receives BLOCKED frames but never sends them
    # quinn-proto 0.11's controllers, cubic its default; 'reno' is its NewReno (as ngtcp2's and
    # quic-go's are named here)
    quic_ccs = ("cubic", "reno", "bbr")
    install_hint = "run 'make quinn' (builds h3server/ into build/bin)"

    def argv(self) -> list[str]:
        return [self.executable(), *self.file_server_args()]

    def reported_cc(self, qlogs: list[Path], trial_dir: Path) -> str | None:
        """The congestion controller quinn ran for the trial's connections: the server's log line
        of each (read back from quinn), found by the original destination connection ID that
        names its qlog (``<odcid>_server.sqlog``). The lines are kept in trial_dir/server-cc.log.
        None without qlogs or lines; several controllers (never expected) are all named."""
        return cc_from_log(self.workdir / f"{self.name}.log", {p.name.split("_", 1)[0] for p in qlogs}, CC_LINE,
                           trial_dir)
