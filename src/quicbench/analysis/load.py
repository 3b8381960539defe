"""Read a run directory (meta.json + trials.jsonl) into a table the analysis can trust.

Every row is kept in ``rows`` (failed ones, warm-ups, rows superseded by a retry). The
statistics use ``ok``: the last row of each trial key, not a warm-up, status ok, with a
goodput. Columns a run does not have (older runs, or features such as captures that were
off) are present as empty columns, so nothing downstream needs to ask.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quicbench.errors import QuicbenchError
from quicbench.model.units import size_label
from quicbench.analysis.condition_params import condition_params

PROTOCOL_ORDER = ("h1", "h2", "h3")
PROTOCOL_NAMES = {"h1": "HTTP/1.1", "h2": "HTTP/2", "h3": "HTTP/3"}

# numeric columns of trials.jsonl (issue 1-4) and of later issues (captures, browser)
NUMERIC = ("seq", "size_bytes", "count", "parallel", "rep", "requests", "requests_ok", "bytes", "start_ns",
           "end_ns", "total_time_s", "goodput_mbps", "connections", "ttfb_ms", "connect_ms", "tls_ms",
           "request_ms_p50", "transfer_ms_p50", "wall_s", "client_cpu_s", "client_process_cpu_s", "server_cpu_s", "client_cpu_pct",
           "server_cpu_pct", "client_cpu_wait_s", "server_cpu_wait_s", "hops", "started_at")
# captures (wire.py) and browser page loads (clients/browser.py)
CAPTURE_NUMERIC = ("wire_bytes_up", "wire_bytes_down", "wire_packets_up", "wire_packets_down", "overhead_pct",
                   "tcp_retransmits", "quic_packets_up", "quic_packets_down", "wire_goodput_mbps", "capture_dropped")
PAGE_NUMERIC = ("page_load_ms", "load_event_ms", "dom_content_loaded_ms", "first_contentful_paint_ms", "page_ttfb_ms",
                "page_response_start_ms", "page_handshake_ms", "page_connect_ms", "page_tls_ms", "page_weight_bytes",
                "page_body_bytes", "page_requests", "page_connections")
OPTIONAL_NUMERIC = CAPTURE_NUMERIC + PAGE_NUMERIC
# integer columns keep exact values (start_ns/end_ns exceed float64's 2^53) as nullable Int64
INTEGER = ("seq", "size_bytes", "count", "parallel", "rep", "requests", "requests_ok", "bytes", "start_ns", "end_ns",
           "connections", "hops", "wire_bytes_up", "wire_bytes_down", "wire_packets_up", "wire_packets_down",
           "tcp_retransmits", "quic_packets_up", "quic_packets_down", "capture_dropped", "page_weight_bytes",
           "page_body_bytes", "page_requests", "page_connections")
TEXT = ("key", "run_id", "condition", "condition_desc", "protocol", "server", "client", "workload", "status",
        "error", "protocols", "cpu_bound_by", "link", "tcp_cc", "page_protocol")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line (the run was killed mid-write)
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _workload_label(r: pd.Series) -> str:
    if isinstance(r.get("workload"), str) and r["workload"]:
        return r["workload"]
    if pd.notna(r.get("size_bytes")):
        return f"{int(r['count']) if pd.notna(r.get('count')) else 1}x{size_label(int(r['size_bytes']))}"
    return "unknown"


def _integers(values: pd.Series) -> pd.Series:
    """Exact nullable integers when every value is integral, else float."""
    out = []
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        elif isinstance(v, bool):
            return pd.to_numeric(values, errors="coerce")
        elif isinstance(v, int):
            out.append(v)
        elif isinstance(v, float) and v.is_integer():
            out.append(int(v))
        else:
            return pd.to_numeric(values, errors="coerce")
    return pd.Series(pd.array(out, dtype="Int64"), index=values.index)


def frame_from_rows(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Normalise raw rows: every known column present, numbers numeric, booleans boolean."""
    df = pd.DataFrame(rows, dtype=object)  # object first: no float rounding of nanosecond stamps
    if df.empty:
        df = pd.DataFrame(columns=["key"])
    known = set(NUMERIC + OPTIONAL_NUMERIC + TEXT + ("warmup", "cpu_bound"))
    for c in df.columns:
        if c not in known:
            df[c] = df[c].infer_objects()
    for c in NUMERIC + OPTIONAL_NUMERIC:
        if c not in df:
            df[c] = pd.Series(pd.array([None] * len(df), dtype="Int64")) if c in INTEGER else np.nan
        elif c in INTEGER:
            df[c] = _integers(df[c].astype(object))
        else:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    for c in TEXT:
        if c not in df:
            df[c] = None
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    for c in ("warmup", "cpu_bound"):
        df[c] = df[c].map(lambda v: bool(v) if v is not None and not (isinstance(v, float) and math.isnan(v))
                          else False).astype(bool) if c in df else False
    df["protocol"] = df["protocol"].fillna("?")
    # a plan that sweeps servers runs one protocol on several servers: those are different
    # stacks, so their cells must not be pooled; they are named "<protocol>@<server>"
    servers_per_proto = df.groupby("protocol")["server"].nunique() if len(df) else pd.Series(dtype=int)
    swept = set(servers_per_proto[servers_per_proto > 1].index)
    if swept:
        mask = df["protocol"].isin(swept) & df["server"].notna()
        df.loc[mask, "protocol"] = df.loc[mask, "protocol"] + "@" + df.loc[mask, "server"].astype(str)
    df["condition"] = df["condition"].fillna("?")
    df["status"] = df["status"].fillna("failed")
    df["workload"] = df.apply(_workload_label, axis=1) if len(df) else df["workload"]
    missing_key = df["key"].isna()
    if missing_key.any():
        parts = df.loc[missing_key, ["condition", "workload", "protocol", "server", "rep"]]
        df.loc[missing_key, "key"] = ["|".join("" if pd.isna(v) else str(v) for v in r)
                                      for r in parts.itertuples(index=False)]
    df["row_index"] = np.arange(len(df))
    # a retried trial (--retry-failed) appends a new row with the same key: the last one counts
    df["superseded"] = df.duplicated("key", keep="last") if len(df) else False
    measured = df["goodput_mbps"].notna() | df["page_load_ms"].notna()   # a page load may lack a goodput
    ok = (df["status"] == "ok") & ~df["superseded"] & ~df["warmup"] & measured
    df["used"] = ok
    gb = df["bytes"] / 1e9
    df["client_cpu_s_per_gb"] = (df["client_cpu_s"] / gb).where(gb > 0)
    df["server_cpu_s_per_gb"] = (df["server_cpu_s"] / gb).where(gb > 0)
    df["cpu_s_per_gb"] = df["client_cpu_s_per_gb"] + df["server_cpu_s_per_gb"]
    wait = df["ttfb_ms"] - df["connect_ms"].fillna(0) - df["tls_ms"].fillna(0)
    df["wait_ms"] = wait.clip(lower=0)
    return df


@dataclass
class RunData:
    run_dir: Path
    meta: dict[str, Any]
    rows: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.run_dir.name)

    @property
    def trials(self) -> pd.DataFrame:
        """Final rows of measured trials (warm-ups and superseded rows removed), ok or failed."""
        return self.rows[~self.rows["warmup"] & ~self.rows["superseded"]]

    @property
    def ok(self) -> pd.DataFrame:
        """The rows the statistics use."""
        return self.rows[self.rows["used"]]

    @cached_property
    def protocols(self) -> list[str]:
        seen = list(dict.fromkeys(self.trials["protocol"]))
        return [p for p in PROTOCOL_ORDER if p in seen] + sorted(p for p in seen if p not in PROTOCOL_ORDER)

    @cached_property
    def workloads(self) -> list[str]:
        """Workload labels ordered by object size, then count, then parallelism."""
        t = self.trials
        if t.empty:
            return []
        w = t.groupby("workload")[["size_bytes", "count", "parallel"]].first().fillna(0)
        return list(w.sort_values(["size_bytes", "count", "parallel"], kind="stable").index)

    @cached_property
    def workload_info(self) -> pd.DataFrame:
        w = self.rows.groupby("workload")[["size_bytes", "count", "parallel"]].first()
        w["size"] = [size_label(int(s)) if pd.notna(s) and s >= 1 else "?" for s in w["size_bytes"]]
        return w

    @cached_property
    def conditions(self) -> pd.DataFrame:
        """Condition parameters, index = name, in display order (only conditions with trials)."""
        names = list(dict.fromkeys(self.trials["condition"]))
        params = condition_params(self.meta, names)
        return params.loc[[c for c in params.index if c in set(names)]]

    @property
    def condition_order(self) -> list[str]:
        return list(self.conditions.index)

    def condition_desc(self, name: str) -> str:
        d = self.rows.loc[self.rows["condition"] == name, "condition_desc"].dropna()
        return str(d.iloc[0]) if len(d) else ""


def load_run(run_dir: Path | str) -> RunData:
    """Read a run directory; a missing meta.json is tolerated (noted), missing trials are not."""
    d = Path(run_dir)
    if not d.is_dir():
        raise QuicbenchError(f"'{d}' is not a directory")
    meta_path, trials_path = d / "meta.json", d / "trials.jsonl"
    if not meta_path.exists() and not trials_path.exists():
        raise QuicbenchError(f"'{d}' is not a quicbench run directory (no meta.json, no trials.jsonl)")
    notes = []
    meta: dict[str, Any] = {}
    if meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
        except json.JSONDecodeError as e:
            notes.append(f"meta.json is not valid JSON ({e}); run metadata is missing")
    else:
        notes.append("meta.json is missing: no plan, versions or host facts")
    rows = _read_jsonl(trials_path) if trials_path.exists() else []
    if not trials_path.exists():
        notes.append("trials.jsonl is missing: the run recorded no trial")
    return RunData(d, meta, frame_from_rows(rows), notes)
