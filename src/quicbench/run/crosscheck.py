"""`quicbench link crosscheck`: the same probe traffic through linkem (this host's kernel) and
through the kernel's netem (User-Mode Linux), compared metric by metric.

Each side measures, in both directions, with the paced UDP probe (quicbench.probe.udp):
- its noise floor: a plain-delay link of the condition's delays (what the side adds by itself);
- the condition.
Verdicts per direction:
- one-way delay: two-sample Kolmogorov-Smirnov test, p > 0.01, on each side's delays plus an
  excess drawn at random from the OTHER side's noise floor (delay measured minus configured):
  if the emulators agree, both samples are emulator + noise A + noise B;
- loss and duplicates: the difference of the two fractions inside its binomial 99 % interval
  (two samples, pooled fraction);
- reorder fraction: within 10 % (relative) of each other, or both below 1 %.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from quicbench.errors import QuicbenchError
from quicbench.model.conditions import Condition

DIRECTIONS = ("up", "down")


def delay_only(cond: Condition) -> Condition:
    """The condition's delays and nothing else: the noise floor's link."""
    hops = [{"up": {"delay_ms": h.up.delay_ms}, "down": {"delay_ms": h.down.delay_ms}} for h in cond.hops]
    return Condition.model_validate({"name": f"{cond.name}-floor", "hops": hops})


def one_way_delay(cond: Condition, direction: str) -> float:
    return sum(getattr(h, direction).delay_ms for h in cond.hops)


def measure_side(link: str, cond: Condition, count: int, pps: float, size: int) -> dict[str, Any]:
    """Noise floor and condition, both directions, through link in a fresh lab of this kernel."""
    from quicbench.lab import LabSpec, make_lab
    from quicbench.probe.udp import probe
    floor = delay_only(cond)
    out: dict[str, Any] = {"kernel": os.uname().release}
    with make_lab(LabSpec(name=f"x{secrets.token_hex(3)}", hops=len(cond.hops), link=link,
                          condition=floor)) as lab:
        out["link"] = lab.link.describe()
        for phase, c in (("floor", floor), ("condition", cond)):
            lab.set_condition(c)
            out[phase] = {}
            for direction in DIRECTIONS:
                src, dst = ("client", "server") if direction == "up" else ("server", "client")
                # ARP first, else the first datagrams wait for it
                subprocess.run(lab.cmd(src, ["ping", "-n", "-c", "1", "-W", "3", lab.address(dst)]),
                               capture_output=True, timeout=10)
                out[phase][direction] = probe(lab.ns(src), lab.ns(dst), lab.address(dst), count=count, pps=pps,
                                              size=size, samples=True)
    return out


def _fraction_verdict(a: float, b: float, n: int, z: float = 2.576) -> tuple[bool, str]:
    """The two fractions (n trials each) agree: their difference lies inside the 99 % binomial
    interval of a difference of two samples (pooled fraction, at least 1/n)."""
    p = max((a + b) / 2, 1 / n)
    half = z * math.sqrt(p * (1 - p) * 2 / n)
    return abs(a - b) <= half + 1e-12, f"{100 * a:.2f} % vs {100 * b:.2f} % (99 % interval of the difference ±{100 * half:.2f} %)"


def compare(cond: Condition, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Verdicts per direction and metric for side a against side b."""
    from scipy.stats import ks_2samp
    result: dict[str, Any] = {}
    for direction in DIRECTIONS:
        d = one_way_delay(cond, direction)
        ca, cb = a["condition"][direction], b["condition"][direction]
        fa, fb = a["floor"][direction], b["floor"][direction]
        v: dict[str, Any] = {"floor_excess_p50_ms": [fa["owd_ms"]["p50"] - d, fb["owd_ms"]["p50"] - d],
                             "floor_excess_p99_ms": [fa["owd_ms"]["p99"] - d, fb["owd_ms"]["p99"] - d]}
        # each side's delays plus noise drawn from the OTHER side's floor: if the emulators agree,
        # both samples are emulator + noise A + noise B, and the KS test compares like with like
        rng = random.Random(1)
        na = [x - d for x in fa["owd_samples_ms"]]
        nb = [x - d for x in fb["owd_samples_ms"]]
        if len(ca["owd_samples_ms"]) >= 20 and len(cb["owd_samples_ms"]) >= 20 and na and nb:
            xa = [x + rng.choice(nb) for x in ca["owd_samples_ms"]]
            xb = [x + rng.choice(na) for x in cb["owd_samples_ms"]]
            ks = ks_2samp(xa, xb)
            v["owd"] = {"verdict": "ok" if ks.pvalue > 0.01 else "differ", "ks_d": ks.statistic,
                        "ks_p": ks.pvalue, "p50_ms": [ca["owd_ms"]["p50"], cb["owd_ms"]["p50"]],
                        "p95_ms": [ca["owd_ms"]["p95"], cb["owd_ms"]["p95"]]}
        else:
            v["owd"] = {"verdict": "fail: too few datagrams arrived"}
        n = ca["sent"]
        ok, text = _fraction_verdict(ca["loss_frac"], cb["loss_frac"], n)
        v["loss"] = {"verdict": "ok" if ok else "differ", "detail": text, "values": [ca["loss_frac"], cb["loss_frac"]]}
        ok, text = _fraction_verdict(ca["dup_frac"], cb["dup_frac"], n)
        v["duplicates"] = {"verdict": "ok" if ok else "differ", "detail": text,
                           "values": [ca["dup_frac"], cb["dup_frac"]]}
        ra, rb = ca["reorder_frac"], cb["reorder_frac"]
        ok = max(ra, rb) < 0.01 or abs(ra - rb) <= 0.1 * max(ra, rb)
        v["reorder"] = {"verdict": "ok" if ok else "differ", "values": [ra, rb],
                        "detail": f"{100 * ra:.1f} % vs {100 * rb:.1f} %"}
        result[direction] = v
    result["ok"] = all(not m["verdict"].startswith(("differ", "fail"))
                       for d in DIRECTIONS for m in result[d].values() if isinstance(m, dict) and "verdict" in m)
    return result


def strip_samples(side: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(side))
    for phase in ("floor", "condition"):
        for d in DIRECTIONS:
            out[phase][d].pop("owd_samples_ms", None)
    return out


def crosscheck(cond: Condition, count: int = 2000, pps: float = 500, size: int = 64) -> dict[str, Any]:
    """linkem on this kernel against netem in User-Mode Linux, same probe traffic."""
    from quicbench.kernels import UmlKernel
    from quicbench.link.netem import unsupported
    why = unsupported(cond)
    if why:
        raise QuicbenchError(f"crosscheck needs a condition netem can apply: {why}")
    uml = UmlKernel()
    ok, why = uml.available()
    if not ok:
        raise QuicbenchError(f"crosscheck needs User-Mode Linux: {why}")
    host = measure_side("linkem", cond, count, pps, size)
    tmp = tempfile.mkdtemp(prefix="qb-crosscheck-")
    try:
        out = os.path.join(tmp, "netem.json")
        argv = [sys.executable, "-m", "quicbench.run.crosscheck", "--link", "netem", "--condition",
                cond.model_dump_json(), "--count", str(count), "--pps", str(pps), "--size", str(size), "--out", out]
        rc = uml.run(argv, dict(os.environ), os.getcwd(), stdout=sys.stderr.buffer)
        if rc != 0 or not os.path.exists(out):
            raise QuicbenchError(f"the netem side failed inside User-Mode Linux (exit {rc})")
        with open(out) as f:
            netem = json.load(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    verdicts = compare(cond, host, netem)
    return {"condition": json.loads(cond.model_dump_json()), "probe": {"count": count, "pps": pps, "size": size},
            "sides": ["linkem (host kernel)", "netem (User-Mode Linux)"],
            "linkem": strip_samples(host), "netem": strip_samples(netem), "verdicts": verdicts, "ok": verdicts["ok"]}


def main(argv: list[str] | None = None) -> int:
    """One side, for the kernel it runs in: python -m quicbench.run.crosscheck --link netem ..."""
    ap = argparse.ArgumentParser(prog="quicbench.run.crosscheck")
    ap.add_argument("--link", required=True)
    ap.add_argument("--condition", required=True, help="condition as JSON")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--pps", type=float, default=500)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    cond = Condition.model_validate_json(a.condition)
    res = measure_side(a.link, cond, a.count, a.pps, a.size)
    with open(a.out, "w") as f:
        json.dump(res, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
