"""Which of this kernel's features work here (netns, veth, the qdiscs netem, tbf and htb, TUN), probed
in a throwaway namespace."""

from __future__ import annotations

import functools
import os
import subprocess

QDISC_ARGS = {
    "netem": ["netem", "delay", "1ms"],
    "tbf": ["tbf", "rate", "10mbit", "burst", "32kbit", "latency", "50ms"],
    "htb": ["htb", "default", "1"],
}


def _sh(*argv: str) -> bool:
    return subprocess.run(list(argv), capture_output=True).returncode == 0


@functools.lru_cache(maxsize=None)
def probe() -> dict[str, bool]:
    """Which of netns, veth, netem, tbf, htb and TUN work here (root needed; else all False)."""
    result = {"netns": False, "veth": False, "tun": os.path.exists("/dev/net/tun")}
    result.update({q: False for q in QDISC_ARGS})
    if os.geteuid() != 0:
        return result
    ns = f"qb-probe-{os.getpid()}"
    if not _sh("ip", "netns", "add", ns):
        return result
    try:
        result["netns"] = True
        result["veth"] = _sh("ip", "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
        if result["veth"]:
            _sh("ip", "-n", ns, "link", "set", "p0", "up")
            for q, args in QDISC_ARGS.items():
                result[q] = _sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "p0", "root", *args)
                _sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "p0", "root")
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return result
