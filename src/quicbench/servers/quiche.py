"""quiche: HTTP/3 on Cloudflare's quiche (QUIC + HTTP/3 in Rust, BoringSSL), quicbench's own
small file server on it.

``make quiche`` (on first use, or ``make stacks`` / ``make setup-all``) builds stacks/quiche/ (quiche pinned,
Cargo.lock committed; it builds BoringSSL with cmake) into build/bin as
``quicbench-quiche-server``. It serves h3 only: one UDP listener, no TCP, one thread. The
sender's loss detection and congestion control are quiche's, so the row's ``server_stack`` names
quiche and boring-sys (the BoringSSL it is built with) with their versions. Its congestion
controller is set per run (the plan's ``quic_cc``: cubic, quiche's default; reno; bbr2, quiche's
BBRv2). It writes no pacing timestamps to the socket (quiche gives each packet a send time; the
server sends it at once, as quiche's example servers do).

quiche has no call that says which controller a connection runs: the server's per-connection
log line names the one it configured. With a plan's ``qlog = true`` it writes quiche's qlog per
connection (``--qlog-dir``, ``<odcid>_server.sqlog``), whose ``congestion_state_updated`` events
name the controller's states: BBRv2's (``bbr_startup``, ``bbr_drain``, ...) or the loss-based
pair's (``slow_start``, ``congestion_avoidance``, ``recovery``, shared by cubic and reno), and
whose ``congestion_window`` drops on a congestion event to 0.7 of itself under cubic and to 0.5
under reno. So each trial's ``quic_cc_seen`` is what quiche logged: bbr2 or not by the states,
cubic or reno by the backoff, and by the configuration where no congestion event happened (see
``reported_cc``).
"""

from __future__ import annotations

import re
from pathlib import Path

from quicbench.servers.base import RustServer

# one line per connection in the server's log: the controller it configured for it
CC_LINE = re.compile(r"^connection ([0-9a-f]+) from \S+: congestion control (\S+)$")
LOSS_BASED = ("cubic", "reno")


def qlog_cc_states(path: Path) -> set[str]:
    """The congestion-controller states a quiche qlog names (its congestion_state_updated)."""
    from quicbench.run.recovery import qlog_records
    states = set()
    for rec in qlog_records(path):
        if str(rec.get("name", "")).endswith(":congestion_state_updated"):
            new = (rec.get("data") or {}).get("new")
            if isinstance(new, str):
                states.add(new)
    return states


# on a congestion event cubic sets its window to 0.7 of itself (RFC 9438's beta), reno to 0.5 (RFC
# 9002): what tells the two apart in the qlog's congestion_window. Below ten packets the window's
# 2-packet floor and rounding blur the ratio.
BACKOFF_SPLIT = 0.6
BACKOFF_RANGE = (0.35, 0.85)
MIN_BACKOFF_CWND = 10 * 1350


def qlog_backoffs(path: Path) -> list[float]:
    """Each drop of a quiche qlog's congestion_window (recovery_metrics_updated), as new / old,
    from windows of at least ten packets."""
    from quicbench.run.recovery import qlog_records
    ratios: list[float] = []
    cwnd = None
    for rec in qlog_records(path):
        if str(rec.get("name", "")).endswith(":recovery_metrics_updated"):
            w = (rec.get("data") or {}).get("congestion_window")
            if isinstance(w, (int, float)):
                if cwnd is not None and w < cwnd and cwnd >= MIN_BACKOFF_CWND:
                    ratios.append(w / cwnd)
                cwnd = w
    return ratios


def backoff_cc(ratios: list[float]) -> str | None:
    """'cubic' (backs off to 0.7) or 'reno' (to 0.5) by the median backoff; None without one."""
    r = sorted(x for x in ratios if BACKOFF_RANGE[0] <= x <= BACKOFF_RANGE[1])
    if not r:
        return None
    return "cubic" if r[len(r) // 2] >= BACKOFF_SPLIT else "reno"


def cc_family(states: set[str]) -> str | None:
    """'bbr2' for BBRv2's states, 'loss-based' for cubic's and reno's, None for neither (or both)."""
    bbr = any(s.startswith("bbr") for s in states)
    other = any(not s.startswith("bbr") for s in states)
    if bbr == other:
        return None
    return "bbr2" if bbr else "loss-based"


class QuicheServer(RustServer):
    name = "quiche"
    protocols = frozenset({"h3"})
    quic_stack = "quiche"
    binary = "quicbench-quiche-server"
    version_args = ("--version",)
    qlog_option = "--qlog-dir"
    # quiche 0.30's controllers, cubic its default; 'bbr2' is its BBRv2 (quiche's "bbr" is the same)
    quic_ccs = ("cubic", "reno", "bbr2")
    install_hint = "run 'make quiche' (builds stacks/quiche/ into build/bin; minutes: BoringSSL)"
    provisions = ("quiche",)

    def argv(self) -> list[str]:
        return [self.executable(), *self.file_server_args()]

    def reported_cc(self, qlogs: list[Path], trial_dir: Path) -> str | None:
        """The congestion controller of the trial's connections as far as quiche says: each
        connection's qlog names its controller's states, BBRv2's or the loss-based pair's; within
        the pair, how far its congestion window dropped on a congestion event tells cubic (to
        0.7) from reno (to 0.5); a connection that had none is named by the server's log line
        (the configured one). The log lines, each connection's states and backoffs are kept in
        trial_dir/server-cc.log. None without qlogs or states; what the qlog shows wins over the
        log line."""
        log = self.workdir / f"{self.name}.log"
        conns = {p.name.split("_", 1)[0]: p for p in qlogs}
        if not conns or not log.is_file():
            return None
        lines = {m.group(1): (line, m.group(2)) for line in log.read_text(errors="replace").splitlines()
                 if (m := CC_LINE.match(line)) and m.group(1) in conns}
        seen: set[str] = set()
        kept = []
        for odcid, path in sorted(conns.items()):
            states = qlog_cc_states(path)
            family = cc_family(states)
            line, configured = lines.get(odcid, ("", None))
            backoffs = qlog_backoffs(path) if family == "loss-based" else []
            said = line or f"connection {odcid}: no log line"
            kept.append(f"{said}; qlog states: {','.join(sorted(states)) or 'none'}"
                        + (f"; cwnd backoffs: {','.join(f'{r:.2f}' for r in backoffs)}" if backoffs else ""))
            if family == "bbr2":
                seen.add("bbr2")
            elif family == "loss-based":
                seen.add(backoff_cc(backoffs) or (configured if configured in LOSS_BASED else "cubic/reno"))
        (trial_dir / "server-cc.log").write_text("".join(k + "\n" for k in kept))
        return ",".join(sorted(seen)) or None
