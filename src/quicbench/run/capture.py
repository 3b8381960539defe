"""Packet capture for a trial: tcpdump in the client node (and optionally the router).

Headers only (snaplen 128: Ethernet + IP + TCP/UDP headers + the first bytes of QUIC), filtered
to the lab's server address. Offloads are off on every lab interface, so each captured frame
is one frame on the wire.
"""

from __future__ import annotations

import gzip
import shutil
import signal
import subprocess
import time
from pathlib import Path

from quicbench.errors import QuicbenchError
from quicbench.lab.base import Lab
from quicbench.paths import find_binary

SNAPLEN = 128
BUFFER_KIB = 65536   # a 64 MiB ring: multi-Gbit/s bursts on the veth must not overflow it


class Capture:
    def __init__(self, lab: Lab, node: str, iface: str, host: str, pcap: Path):
        self.lab, self.node, self.iface, self.host, self.pcap = lab, node, iface, host, pcap
        self.proc: subprocess.Popen | None = None
        self.log = pcap.with_name(pcap.stem + "-tcpdump.log")

    def start(self, timeout: float = 5.0) -> None:
        self.pcap.parent.mkdir(parents=True, exist_ok=True)
        tcpdump = find_binary("tcpdump", "run 'make capture' (apt-get install tcpdump)")
        with open(self.log, "wb") as log:
            # -Z root: do not drop privileges (the run directory belongs to root)
            self.proc = subprocess.Popen(self.lab.cmd(self.node, [
                tcpdump, "-i", self.iface, "-s", str(SNAPLEN), "-B", str(BUFFER_KIB), "-n", "-U", "--immediate-mode", "-Z", "root", "-w", str(self.pcap),
                "host", self.host]), stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while b"listening on" not in self.log.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise QuicbenchError(f"tcpdump did not start in {self.node}: "
                                     + self.log.read_text(errors="replace").strip()[-200:])
            time.sleep(0.005)

    def stop(self) -> dict[str, int]:
        """Stop the capture; returns tcpdump's counters (captured, dropped by kernel)."""
        if self.proc is None:
            return {}
        if self.proc.poll() is None:
            # tcpdump drops what it has not written yet when interrupted: let it drain first
            # (with -U the file grows packet by packet), then stop it
            last, stable, deadline = -1, 0, time.monotonic() + 3
            while stable < 3 and time.monotonic() < deadline:
                size = self.pcap.stat().st_size if self.pcap.exists() else 0
                stable = stable + 1 if size == last else 0
                last = size
                time.sleep(0.02)
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        text = self.log.read_text(errors="replace")
        counts = {}
        for key, label in (("captured", "packets captured"), ("received", "packets received by filter"),
                           ("dropped_by_kernel", "packets dropped by kernel")):
            for line in text.splitlines():
                words = line.split()
                if line.strip().endswith(label) and words and words[0].isdigit():
                    counts[key] = int(words[0])
        return counts


def finish_pcap(pcap: Path, keep: str) -> Path | None:
    """keep = 'compressed' (gzip), 'raw' or 'delete'; returns what remains."""
    if not pcap.exists():
        return None
    if keep == "delete":
        pcap.unlink()
        return None
    if keep == "compressed":
        gz = pcap.with_name(pcap.name + ".gz")
        with open(pcap, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
        pcap.unlink()
        return gz
    return pcap
