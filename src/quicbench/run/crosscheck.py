"""`quicbench link crosscheck`: the same probe traffic through linkem (this host's kernel) and
through the kernel's netem (User-Mode Linux), compared metric by metric.

Each side measures, in both directions, with the paced UDP probe (quicbench.probe.udp):
- its noise floor: a plain-delay link of the condition's delays (what the side adds by itself);
- the condition.
Verdicts per direction:
- one-way delay: two-sample Kolmogorov-Smirnov test, p > 0.01, on each side's delays plus an
  excess drawn at random from the OTHER side's noise floor (delay measured minus configured):
  if the emulators agree, both samples are emulator + noise A + noise B. With 2000 datagrams
  the test finds shifts of a few tens of microseconds between two kernels' timers; where it
  does, but every quantile p5…p95 of the two sides lies within ``OWD_EQUIVALENT_MS``, the
  verdict is "ok (equivalent …)": far below what a path of milliseconds can show;
- loss and duplicates: the difference of the two fractions inside its binomial 99 % interval
  (two samples, pooled fraction);
- reorder fraction: within 10 % (relative) of each other, or both below 1 %.

Goodput (``goodput_reps`` > 0): each side also measures TCP (iperf3, server to client, in the
probe's lab) and runs a small quicbench plan through the same condition — HTTP/2 and HTTP/3,
``GOODPUT_WORKLOAD`` with one connection per object, ``goodput_reps`` repetitions — with the real
runner (inside UML that run first measures the kernel's ceiling, run/ceiling.py). Verdict per
metric, with the reports' method (quicbench.stats): "equivalent" when two one-sided tests on log
goodput show the ratio linkem/netem within ±10 %, "differ" when Welch's t-test on log goodput
finds a difference, else "inconclusive" with the repetitions that would likely decide (alpha
0.01, Holm over the metrics of one crosscheck); a side whose trials were CPU-bound or near its
kernel's ceiling is not judged (it measured the machine, not the link).
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
from pathlib import Path
from typing import Any

from quicbench import stats
from quicbench.errors import QuicbenchError
from quicbench.model.conditions import Condition

DIRECTIONS = ("up", "down")
OWD_EQUIVALENT_MS = 0.25
OWD_QUANTILES = ("p5", "p25", "p50", "p75", "p95")
GOODPUT_WORKLOAD = {"size": "1MB", "count": 4, "connections": "per-object"}
GOODPUT_PROTOCOLS = ("h2", "h3")
IPERF_S = 5.0


def delay_only(cond: Condition) -> Condition:
    """The condition's delays and nothing else: the noise floor's link."""
    hops = [{"up": {"delay_ms": h.up.delay_ms}, "down": {"delay_ms": h.down.delay_ms}} for h in cond.hops]
    return Condition.model_validate({"name": f"{cond.name}-floor", "hops": hops})


def one_way_delay(cond: Condition, direction: str) -> float:
    return sum(getattr(h, direction).delay_ms for h in cond.hops)


def drain_s(cond: Condition, direction: str) -> float:
    """How long a probe waits after its last datagram before the receiver may stop at its first
    idle gap (udp.probe): twice the path's worst one-way delay and jitter, and 0.3 s. Datagrams
    still queued behind a rate keep arriving, so the gap only comes once the queue has drained."""
    worst_ms = sum(getattr(h, direction).delay_ms + (getattr(h, direction).jitter_ms or 0) for h in cond.hops)
    return 0.3 + 2 * worst_ms / 1000


def measure_side(link: str, cond: Condition, count: int, pps: float, size: int,
                 goodput_reps: int = 0) -> dict[str, Any]:
    """Noise floor and condition, both directions, through link in a fresh lab of this kernel;
    with goodput_reps, TCP and HTTP goodput through the condition too."""
    out = _probe_side(link, cond, count, pps, size, goodput_reps)
    if goodput_reps:
        out["goodput"].update(_http_goodput(link, cond, goodput_reps))
    return out


def _http_goodput(link: str, cond: Condition, reps: int) -> dict[str, Any]:
    """h2 and h3 goodput through cond with the real runner, in this kernel: {proto: {...}}."""
    from rich.console import Console

    from quicbench.model.plan import Plan
    from quicbench.run.runner import start_run
    plan = Plan.model_validate({"name": "crosscheck-goodput", "link": link, "protocols": list(GOODPUT_PROTOCOLS),
                                "repetitions": reps, "trial_timeout_s": 300,
                                "conditions": [json.loads(cond.model_dump_json())],
                                "workloads": [GOODPUT_WORKLOAD]})
    tmp = tempfile.mkdtemp(prefix="qb-crosscheck-run-")
    try:
        store = start_run(plan, Path(tmp), Console(file=sys.stderr), plan_source="crosscheck")
        rows = [r for r in store.rows() if not r["key"].endswith("|warmup")]
        meta = store.read_meta()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out: dict[str, Any] = {}
    for proto in GOODPUT_PROTOCOLS:
        mine = [r for r in rows if r["protocol"] == proto]
        out[proto] = {"mbps": [r["goodput_mbps"] for r in mine if r["status"] == "ok"],
                      "failed": [r.get("error") for r in mine if r["status"] != "ok"],
                      "cpu_bound": sum(bool(r.get("cpu_bound")) for r in mine),
                      "near_ceiling": sum(bool(r.get("near_ceiling")) for r in mine)}
    if meta.get("ceiling"):
        out["ceiling_mbps"] = meta["ceiling"]["goodput_mbps"]
    return out


def _probe_side(link: str, cond: Condition, count: int, pps: float, size: int, goodput_reps: int) -> dict[str, Any]:
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
                                              size=size, samples=True, drain_s=drain_s(c, direction))
        if goodput_reps:
            from quicbench.run.calibrate import measure_iperf3
            tcp = [measure_iperf3(lab, seconds=IPERF_S) for _ in range(goodput_reps)]
            out["goodput"] = {"tcp": {"mbps": [t["goodput_mbps"] for t in tcp if "error" not in t],
                                      "failed": [t["error"] for t in tcp if "error" in t]}}
    return out


def owd_verdict(ks_p: float, qa: dict[str, float], qb: dict[str, float]) -> str:
    """The KS test's verdict, or "ok (equivalent …)" where it differs but no quantile p5…p95
    (of those both sides report) is more than OWD_EQUIVALENT_MS apart."""
    if ks_p > 0.01:
        return "ok"
    shared = [q for q in OWD_QUANTILES if q in qa and q in qb]   # a side may report fewer quantiles
    worst = max((abs(qa[q] - qb[q]) for q in shared), default=math.inf)
    if worst <= OWD_EQUIVALENT_MS:
        return f"ok (equivalent: quantiles p5–p95 within {worst:.2f} ms)"
    return "differ"


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
            v["owd"] = {"verdict": owd_verdict(ks.pvalue, ca["owd_ms"], cb["owd_ms"]), "ks_d": ks.statistic,
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


def _goodput_verdict(a: dict[str, Any], b: dict[str, Any], result: stats.TestResult | None) -> dict[str, Any]:
    """One goodput metric of both sides, from its comparison (linkem/netem): equivalent within
    ±10 %, different, or inconclusive, with the ratio of geometric means and its interval at the
    verdict's level (Holm over the crosscheck's metrics); never 'ok' from a failure to find a
    difference. values: each side's geometric mean."""
    xa, xb = a.get("mbps") or [], b.get("mbps") or []
    v: dict[str, Any] = {"values": [_mean(xa), _mean(xb)], "n": [len(xa), len(xb)]}
    busy = [side for side, x in (("linkem", a), ("netem", b)) if x.get("cpu_bound") or x.get("near_ceiling")]
    if not xa or not xb:
        v["verdict"] = "fail: no successful measurement" + (f" ({(a.get('failed') or b.get('failed'))[0]})"
                                                             if a.get("failed") or b.get("failed") else "")
        return v
    ma, mb = v["values"]
    rel = abs(ma - mb) / max(ma, mb) if max(ma, mb) > 0 else 0.0
    v["detail"] = f"{ma:.2f} vs {mb:.2f} Mbit/s ({100 * rel:.0f} % apart, n {len(xa)}/{len(xb)})"
    if busy:
        v["verdict"] = f"not judged: {' and '.join(busy)} trials CPU-bound or near the kernel's ceiling"
        return v
    assert result is not None
    v.update(welch_p=result.p, ratio=result.ratio, ratio_ci=[result.ratio_low, result.ratio_high],
             equivalence_p=result.p_equiv)
    ratio = ("linkem/netem {} [{}, {}]".format(*stats.estimate_digits(result.ratio, result.ratio_low,
                                                                       result.ratio_high, sig=3))
             if result.ratio is not None else "")
    if result.verdict == stats.EQUIVALENT:
        v["verdict"] = f"ok: equivalent within ±{100 * GOODPUT_MARGIN:g} % ({ratio})"
    elif result.verdict == stats.DIFFERENT:
        inside = f", {stats.inside_margin_words(stats.margin_text(result))}" if result.inside_margin else ""
        v["verdict"] = f"differ ({ratio}, p {result.p:.2g}{inside})"
    elif result.verdict == stats.INCONCLUSIVE:
        need = f"; about {result.reps_to_decide} repetitions per side would likely decide" if result.reps_to_decide else ""
        v["verdict"] = f"inconclusive ({ratio}{need})"
    else:
        v["verdict"] = f"not judged: fewer than {stats.MIN_N} repetitions on a side"
    return v


def _mean(x: list[float]) -> float | None:
    """The geometric mean of the goodputs (the value the ratio of geometric means compares), or
    the arithmetic mean when a goodput is 0."""
    if not x:
        return None
    g = stats.gmean(x)
    return g if math.isfinite(g) else sum(x) / len(x)


GOODPUT_MARGIN = 0.10


def compare_goodput(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Verdicts for TCP (iperf3) and each HTTP protocol, side a (linkem) against b (netem); the
    family of the Holm correction is this crosscheck's metrics."""
    ga, gb = a.get("goodput") or {}, b.get("goodput") or {}
    metrics = [m for m in ("tcp", *GOODPUT_PROTOCOLS) if m in ga and m in gb]
    results = stats.adjust([stats.compare(ga[m].get("mbps") or [], gb[m].get("mbps") or [], margin=GOODPUT_MARGIN)
                            for m in metrics], stats.DEFAULT_CORRECTION)
    return {m: _goodput_verdict(ga[m], gb[m], r) for m, r in zip(metrics, results)}


COLUMNS = ("direction", "metric", "linkem (host)", "netem (UML)", "verdict")


def table_rows(res: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """A crosscheck result as rows of COLUMNS (the CLI's table, tools/results' markdown)."""
    rows = []
    for d in DIRECTIONS:
        v = res["verdicts"][d]
        fl = v["floor_excess_p50_ms"]
        rows.append((d, "noise floor p50 (ms over delay)", f"{fl[0]:+.3f}", f"{fl[1]:+.3f}", ""))
        o = v["owd"]
        if "p50_ms" in o:
            rows.append((d, "one-way delay p50 / p95 (ms)", f"{o['p50_ms'][0]:.2f} / {o['p95_ms'][0]:.2f}",
                         f"{o['p50_ms'][1]:.2f} / {o['p95_ms'][1]:.2f}",
                         f"{o['verdict']}: KS D {o['ks_d']:.3f} p {o['ks_p']:.3g}"))
        else:
            rows.append((d, "one-way delay", "", "", o["verdict"]))
        for m in ("loss", "duplicates", "reorder"):
            a, b = v[m]["values"]
            rows.append((d, m + " (%)", f"{100 * a:.2f}", f"{100 * b:.2f}", v[m]["verdict"]))
    names = {"tcp": "TCP goodput (iperf3)", "h2": "h2 goodput", "h3": "h3 goodput"}
    for m, g in (res["verdicts"].get("goodput") or {}).items():
        a, b = g["values"]
        rows.append(("down", f"{names.get(m, m)} (Mbit/s, geometric mean of {min(g['n'])})",
                     "" if a is None else f"{a:.2f}", "" if b is None else f"{b:.2f}", g["verdict"]))
    top = ((res.get("netem") or {}).get("goodput") or {}).get("ceiling_mbps")
    if top:
        rows.append(("down", "UML's ceiling (Mbit/s, unimpaired)", "",
                     " / ".join(f"{p} {x:.1f}" for p, x in top.items()), ""))
    return rows


def strip_samples(side: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(side))
    for phase in ("floor", "condition"):
        for d in DIRECTIONS:
            out[phase][d].pop("owd_samples_ms", None)
    return out


def crosscheck(cond: Condition, count: int = 2000, pps: float = 500, size: int = 64,
               goodput_reps: int = 0) -> dict[str, Any]:
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
    host = measure_side("linkem", cond, count, pps, size, goodput_reps)
    tmp = tempfile.mkdtemp(prefix="qb-crosscheck-")
    try:
        out = os.path.join(tmp, "netem.json")
        argv = [sys.executable, "-m", "quicbench.run.crosscheck", "--link", "netem", "--condition",
                cond.model_dump_json(), "--count", str(count), "--pps", str(pps), "--size", str(size),
                "--goodput-reps", str(goodput_reps), "--out", out]
        rc = uml.run(argv, dict(os.environ), os.getcwd(), stdout=sys.stderr.buffer, scratch=(tmp,))
        if rc != 0 or not os.path.exists(out):
            raise QuicbenchError(f"the netem side failed inside User-Mode Linux (exit {rc})")
        with open(out) as f:
            netem = json.load(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    verdicts = compare(cond, host, netem)
    if goodput_reps:
        verdicts["goodput"] = compare_goodput(host, netem)
        verdicts["ok"] = verdicts["ok"] and not any(m["verdict"].startswith(("differ", "fail"))
                                                    for m in verdicts["goodput"].values())
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
    ap.add_argument("--goodput-reps", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    cond = Condition.model_validate_json(a.condition)
    res = measure_side(a.link, cond, a.count, a.pps, a.size, a.goodput_reps)
    with open(a.out, "w") as f:
        json.dump(res, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
