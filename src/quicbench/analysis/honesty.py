"""What a reviewer needs to trust the numbers: CPU cost, CPU-bound and failed trials,
link calibration (configured vs measured), and the run's metadata."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

import pandas as pd

from quicbench import stats
from quicbench.cpu import CELL_MIN_TRIALS, PathCpu, slowed_against_cell
from quicbench.analysis.load import RunData
from quicbench.stats import finite as _num


def cpu_per_gb(run: RunData) -> pd.DataFrame:
    """Per protocol x workload (all conditions pooled): CPU seconds per GB of payload, mean and bootstrap CI."""
    ok = run.ok
    rows = []
    for (p, w), g in ok.groupby(["protocol", "workload"], sort=False):
        row: dict[str, Any] = {"protocol": p, "workload": w, "n": len(g), "gb": float(g["bytes"].sum() / 1e9),
                               "n_cpu_bound": int(g["cpu_bound"].sum())}
        for who in ("client", "server", ""):
            col = f"{who}_cpu_s_per_gb" if who else "cpu_s_per_gb"
            s = stats.summarize(g[col], scale=stats.NONNEG)     # non-negative, skewed: bootstrap
            row.update({f"{col}_mean": s.mean, f"{col}_ci_low": s.ci_low, f"{col}_ci_high": s.ci_high,
                        f"{col}_n": s.n})
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    po = {p: i for i, p in enumerate(run.protocols)}
    wo = {w: i for i, w in enumerate(run.workloads)}
    return df.sort_values(["protocol", "workload"], key=lambda s: s.map(po if s.name == "protocol" else wo)
                          ).reset_index(drop=True)


def cpu_bound_trials(run: RunData) -> pd.DataFrame:
    """Successful trials flagged CPU-bound, counted per cell and by whom (client/server)."""
    t = run.trials[run.trials["status"] == "ok"]
    b = t[t["cpu_bound"]]
    if b.empty:
        return pd.DataFrame(columns=["condition", "workload", "protocol", "cpu_bound_by", "trials", "of"])
    total = t.groupby(["condition", "workload", "protocol"]).size()
    out = (b.assign(cpu_bound_by=b["cpu_bound_by"].fillna("?"))
           .groupby(["condition", "workload", "protocol", "cpu_bound_by"]).size().rename("trials").reset_index())
    out["of"] = [int(total.get((c, w, p), 0)) for c, w, p in zip(out["condition"], out["workload"], out["protocol"])]
    return out


SLOWED_COLUMNS = ["condition", "workload", "protocol", "rep", "time_s", "cell_median_s", "path_wait_s", "slowed_by"]


def cpu_slowed_trials(run: RunData) -> pd.DataFrame:
    """Successful trials the CPU slowed, judged after the run against their cell on the same host
    (quicbench.cpu.slowed_against_cell): at least 5 % slower than the cell's median time, with the
    path's run-queue waits adding up to the extra time. Cells of fewer than 3 successful trials
    are not judged."""
    t = run.ok
    if t.empty:
        return pd.DataFrame(columns=SLOWED_COLUMNS)
    # the cell with its server and client (the key but the repetition), on one host: a merged run's
    # hosts differ in speed, and the judgement is of a trial against its siblings on the same machine
    cell = t["key"].str.rsplit("|", n=1).str[0]
    host = t["host"].fillna("?") if "host" in t else pd.Series("", index=t.index)
    out = []
    for _, g in t.groupby([cell, host], sort=False):
        rows = g.astype(object).where(g.notna(), None).to_dict("records")
        evidence = [PathCpu.from_row(r, None) for r in rows]
        times = [e.duration_s for e in evidence if e.duration_s]
        if len(times) < CELL_MIN_TRIALS:
            continue
        median = float(pd.Series(times).median())
        for r, e in zip(rows, evidence):
            who = slowed_against_cell(e, median)
            if who:
                out.append({"condition": r["condition"], "workload": r["workload"], "protocol": r["protocol"],
                            "rep": r.get("rep"), "time_s": e.duration_s, "cell_median_s": median,
                            "path_wait_s": sum(w for w in e.waited.values() if w is not None),
                            "slowed_by": ",".join(who)})
    return pd.DataFrame(out, columns=SLOWED_COLUMNS)


_MASK = [(re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<addr>"),
         (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
         (re.compile(r"(?<![/\w.])\d+(?:\.\d+)?(?:s|ms)?\b"), "<n>")]


def reason(error: Any) -> str:
    """An error message with addresses and numbers masked, so alike failures group together."""
    if not error:
        return "(no message)"
    s = str(error)
    for rx, rep in _MASK:
        s = rx.sub(rep, s)
    return s[:300]


def failed_trials(run: RunData) -> pd.DataFrame:
    """Every failed row (warm-ups included, flagged) and what became of its trial."""
    r = run.rows
    f = r[r["status"] != "ok"].copy()
    cols = ["seq", "condition", "workload", "protocol", "rep", "warmup", "error", "retried"]
    if f.empty:
        return pd.DataFrame(columns=cols)
    final = r.drop_duplicates("key", keep="last").set_index("key")["status"]
    f["retried"] = [("ok on retry" if final.get(k) == "ok" else "failed again") if s else ""
                    for k, s in zip(f["key"], f["superseded"])]
    return f[cols].reset_index(drop=True)


def failure_reasons(run: RunData) -> pd.DataFrame:
    """Failed rows grouped by masked reason: how many, which protocols and conditions."""
    f = failed_trials(run)
    if f.empty:
        return pd.DataFrame(columns=["reason", "trials", "protocols", "conditions", "example"])
    f["reason"] = f["error"].map(reason)
    rows = []
    for rsn, g in f.groupby("reason", sort=False):
        rows.append({"reason": rsn, "trials": len(g), "protocols": ", ".join(sorted(set(g["protocol"]))),
                     "conditions": ", ".join(dict.fromkeys(g["condition"])), "example": str(g["error"].iloc[0])})
    return pd.DataFrame(rows).sort_values("trials", ascending=False, kind="stable").reset_index(drop=True)


HOST_COLUMNS = ["host", "trials", "ok", "failed", "cpu_bound", "goodput_vs_cell_pct", "n_goodput"]


def per_host(run: RunData) -> pd.DataFrame:
    """Per host of a merged (or multi-host) run: trials, failures, CPU-bound trials, and its
    goodput relative to the mean of the same cell over all hosts (mean of goodput / cell mean − 1, %).
    Shards get a fair share of each condition, so a host that is systematically slower shows here.
    Empty for a run from one host that is not a merge."""
    t = run.trials
    if "host" not in t or t.empty:
        return pd.DataFrame(columns=HOST_COLUMNS)
    hosts = t["host"].fillna("?")
    if hosts.nunique() < 2 and not run.meta.get("merge"):
        return pd.DataFrame(columns=HOST_COLUMNS)
    ok = run.ok.assign(host=run.ok["host"].fillna("?"))
    cell_mean = ok.groupby(["condition", "workload", "protocol"])["goodput_mbps"].transform("mean")
    rel = 100 * (ok["goodput_mbps"] / cell_mean - 1)
    rows = []
    for h, g in t.assign(host=hosts).groupby("host", sort=True):
        r = rel[ok["host"] == h].dropna()
        rows.append({"host": h, "trials": len(g), "ok": int((g["status"] == "ok").sum()),
                     "failed": int((g["status"] != "ok").sum()), "cpu_bound": int(g["cpu_bound"].sum()),
                     "goodput_vs_cell_pct": float(r.mean()) if len(r) else None, "n_goodput": len(r)})
    return pd.DataFrame(rows, columns=HOST_COLUMNS)


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix or "value": d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out




# quicbench's calibrate.py: {configured: {rtt_ms, loss_pct, rate_mbit}, ping: {...}, iperf3: {...}, verdicts}
_CALIBRATE = (("RTT (ms, median ping)", "configured.rtt_ms", "ping.rtt_p50_ms", "rtt"),
              ("round-trip loss (%, ping)", "configured.loss_pct", "ping.loss_pct", "loss"),
              ("rate (Mbit/s) vs iperf3 goodput", "configured.rate_mbit", "iperf3.goodput_mbps", "goodput"))
CALIBRATION_COLUMNS = ["condition", "quantity", "configured", "measured", "deviation_pct", "verdict"]


def _path(d: Any, path: str) -> Any:
    for part in path.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def _calibrate_rows(cond: str, v: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    verdicts = v.get("verdicts") or {}
    for label, cpath, mpath, vkey in _CALIBRATE:
        c, m = _path(v, cpath), _path(v, mpath)
        if c is None and m is None and vkey not in verdicts:
            continue
        rows.append({"condition": cond, "quantity": label, "configured": c, "measured": m,
                     "verdict": verdicts.get(vkey)})
    return rows


def calibration(meta: dict[str, Any]) -> pd.DataFrame:
    """meta['calibration'] as rows: condition, quantity, configured, measured, deviation %, verdict.

    Reads what `quicbench run` with calibrate = true stores (calibrate.py: configured RTT, loss
    and rate against the median ping RTT, ping loss and iperf3 goodput, with verdicts); also
    {condition: {configured: {...}, measured: {...}}}, {condition: {x_configured, x_measured}}
    and a list of {condition, ...} dicts; anything else is shown as measured.
    """
    cal = meta.get("calibration")
    if isinstance(cal, list):
        cal = {str(c.get("condition", i)): {k: v for k, v in c.items() if k != "condition"}
               for i, c in enumerate(cal) if isinstance(c, dict)}
    if not isinstance(cal, dict) or not cal:
        return pd.DataFrame(columns=CALIBRATION_COLUMNS)
    rows: list[dict[str, Any]] = []
    for cond, v in cal.items():
        if isinstance(v, dict) and any(k in v for k in ("ping", "iperf3", "verdicts")):
            rows += _calibrate_rows(str(cond), v)
            continue
        if isinstance(v, dict) and ("configured" in v or "measured" in v):
            conf, meas = _flatten(v.get("configured") or {}), _flatten(v.get("measured") or {})
            extra = _flatten({k: x for k, x in v.items() if k not in ("configured", "measured")})
            meas = {**meas, **{k: x for k, x in extra.items() if k not in meas}}
        else:
            flat = _flatten(v)
            conf, meas = {}, {}
            for k, x in flat.items():
                m = re.match(r"^(configured_)?(.*?)(_configured|_measured)?$", k)
                base = m.group(2) if m else k
                if k.startswith("configured_") or k.endswith("_configured"):
                    conf[base] = x
                else:
                    meas[base.removeprefix("measured_")] = x
        for q in dict.fromkeys([*conf, *meas]):
            c, m = conf.get(q), meas.get(q)
            rows.append({"condition": str(cond), "quantity": q, "configured": c, "measured": m, "verdict": None})
    for r in rows:
        cn, mn = _num(r["configured"]), _num(r["measured"])
        r["deviation_pct"] = 100 * (mn - cn) / cn if cn not in (None, 0) and mn is not None else None
    return pd.DataFrame(rows, columns=CALIBRATION_COLUMNS)


def _when(ts: Any) -> str | None:
    f = _num(ts)
    if f is None:
        return None
    return _dt.datetime.fromtimestamp(f, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def metadata(run: RunData) -> list[tuple[str, str]]:
    """The run's self-description as (label, value) pairs, in reading order; empty values left out."""
    m, plan = run.meta, run.meta.get("plan") or {}
    items: list[tuple[str, Any]] = [
        ("run id", run.run_id), ("status", m.get("status")), ("created", _when(m.get("created"))),
        ("finished", _when(m.get("finished_at"))), ("resumed", _when(m.get("resumed_at"))),
        ("plan", plan.get("name")), ("plan description", plan.get("description")),
        ("plan fingerprint", m.get("plan_fingerprint")),
        ("repetitions", m.get("reps") or plan.get("repetitions")), ("order", plan.get("order")),
        ("seed", plan.get("seed")), ("warm-up trials per condition", plan.get("warmup")),
        ("trial timeout (s)", plan.get("trial_timeout_s")), ("only", m.get("only") or None),
    ]
    for k, v in _flatten(m.get("host") or {}).items():
        items.append((f"host {k}", v))
    for k, v in _flatten(m.get("versions") or {}).items():
        items.append((f"version {k}", v))
    lab, link = m.get("lab") or {}, m.get("link") or {}
    items += [("lab backend", lab.get("backend")), ("router hops", lab.get("hops") or plan.get("hops")),
              ("TCP congestion control", ", ".join(plan["tcp_cc"]) if isinstance(plan.get("tcp_cc"), list)
               else lab.get("tcp_cc") or plan.get("tcp_cc")),
              ("TCP initial window (segments)", lab.get("tcp_initcwnd") or plan.get("tcp_initcwnd")),
              ("QUIC congestion control asked", plan.get("quic_cc")),
              ("offloads (TSO/GSO/GRO)", "on" if lab.get("offload") or plan.get("offload") else None),
              ("link emulator", link.get("name") if isinstance(link, dict) else link),
              ("link detail", link.get("detail") if isinstance(link, dict) else None),
              ("TLS hostname", (m.get("tls") or {}).get("hostname")),
              ("client", plan.get("client")), ("server ports", ", ".join(f"{k}={v}" for k, v in
                                                                   (m.get("server_ports") or {}).items()) or None),
              ("captures", plan.get("capture")), ("calibration requested", plan.get("calibrate"))]
    return [(k, str(v)) for k, v in items if v is not None and v != "" and v != {}]
