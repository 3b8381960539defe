"""`make bench`: speed and accuracy figures, written to bench/results/*.json and printed.

- trial overhead: lab up, server start/stop and the fixed cost of a trial once the lab is up
  (client start, handshakes, bookkeeping: a trial's wall time minus its transfer time);
- link emulator (when linkem is built): see bench_link.
"""

from __future__ import annotations

import json
import secrets
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from quicbench.clients import LoadClient, Target
from quicbench.model.conditions import Condition
from quicbench.content.objects import generate
from quicbench.lab import LabSpec, make_lab
from quicbench.paths import REPO_ROOT
from quicbench.model.plan import TrialSpec, Workload
from quicbench.servers import CaddyServer
from quicbench.tls import make_tls
from quicbench.run.trial import run_trial

RESULTS = REPO_ROOT / "bench" / "results"


def p50(xs):
    return statistics.median(xs) if xs else None


def bench_trial_overhead(reps: int = 10) -> dict:
    import tempfile
    out: dict = {"reps": reps}
    with tempfile.TemporaryDirectory(prefix="qb-bench-") as tmp:
        wd = Path(tmp)
        content = generate({10_000: 1})
        t0 = time.monotonic()
        lab = make_lab(LabSpec(name=f"b{secrets.token_hex(3)}", link="plain"))
        lab.up()
        out["lab_up_s"] = time.monotonic() - t0
        try:
            tls = make_tls(wd / "tls", ips=[lab.address("server")])
            server = CaddyServer(lab, wd / "caddy", content, tls)
            t0 = time.monotonic()
            server.start()
            out["server_start_s"] = time.monotonic() - t0
            target = Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=443, tls=tls,
                            content=content)
            per_proto = {}
            for proto in ("h1", "h2", "h3"):
                walls, transfers, overheads = [], [], []
                for r in range(reps):
                    spec = TrialSpec(r, Condition(name="none"), Workload(size="10KB", count=1), proto, "caddy", r)
                    t0 = time.monotonic()
                    row = run_trial(spec, target, LoadClient(), server.pid, wd / f"t-{proto}-{r}", 30)
                    wall = time.monotonic() - t0
                    assert row["status"] == "ok", row["error"]
                    walls.append(wall)
                    transfers.append(row["total_time_s"])
                    overheads.append(wall - row["total_time_s"])
                per_proto[proto] = {"trial_wall_s_p50": p50(walls), "transfer_s_p50": p50(transfers),
                                    "fixed_overhead_s_p50": p50(overheads), "fixed_overhead_s_max": max(overheads)}
            out["per_protocol"] = per_proto
            t0 = time.monotonic()
            server.stop()
            out["server_stop_s"] = time.monotonic() - t0
        finally:
            t0 = time.monotonic()
            lab.down()
            out["lab_down_s"] = time.monotonic() - t0
    return out


def main() -> None:
    console = Console()
    RESULTS.mkdir(parents=True, exist_ok=True)
    res = bench_trial_overhead()
    (RESULTS / "trial_overhead.json").write_text(json.dumps(res, indent=2))
    t = Table("protocol", "trial wall p50 (ms)", "transfer p50 (ms)", "fixed overhead p50 (ms)", "max (ms)",
              title=f"trial overhead (1 x 10KB, {res['reps']} trials each; lab up {1000 * res['lab_up_s']:.0f} ms, "
                    f"server start {1000 * res['server_start_s']:.0f} ms, lab down {1000 * res['lab_down_s']:.0f} ms)")
    for proto, v in res["per_protocol"].items():
        t.add_row(proto, f"{1000 * v['trial_wall_s_p50']:.1f}", f"{1000 * v['transfer_s_p50']:.1f}",
                  f"{1000 * v['fixed_overhead_s_p50']:.1f}", f"{1000 * v['fixed_overhead_s_max']:.1f}")
    console.print(t)
    try:
        from bench_link import main as link_main
    except ImportError:
        console.print("link emulator benchmark: not available")
    else:
        link_main(console, RESULTS)
    console.print(f"results in {RESULTS}")


if __name__ == "__main__":
    sys.exit(main())
