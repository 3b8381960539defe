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

from quicbench.analysis.condition_params import condition_params
from quicbench.errors import QuicbenchError
from quicbench.model import columns
from quicbench.model.units import size_label
from quicbench.store import RunLayout, confined, read_jsonl_checked, read_meta

PROTOCOL_ORDER = ("h1", "h2", "h3")
PROTOCOL_NAMES = {"h1": "HTTP/1.1", "h2": "HTTP/2", "h3": "HTTP/3"}

# column groups from the columns table (quicbench.model.columns): the one row schema
_NUMERIC_TYPES = ("int", "float")
NUMERIC = tuple(c.name for c in columns.COLUMNS if c.group == "trial" and c.type in _NUMERIC_TYPES)
CAPTURE_NUMERIC = tuple(c.name for c in columns.COLUMNS if c.group == "capture" and c.type in _NUMERIC_TYPES)
PAGE_NUMERIC = tuple(c.name for c in columns.COLUMNS if c.group == "page" and c.type in _NUMERIC_TYPES)
VIDEO_NUMERIC = tuple(c.name for c in columns.COLUMNS if c.group == "video" and c.type in _NUMERIC_TYPES)
LOAD_NUMERIC = tuple(c.name for c in columns.COLUMNS if c.group == "load" and c.type in _NUMERIC_TYPES)
LINK_NUMERIC = tuple(c.name for c in columns.COLUMNS if c.group == "link" and c.type in _NUMERIC_TYPES)
RECOVERY_NUMERIC = tuple(c.name for c in columns.COLUMNS if c.group == "recovery" and c.type in _NUMERIC_TYPES)
OPTIONAL_NUMERIC = CAPTURE_NUMERIC + PAGE_NUMERIC + VIDEO_NUMERIC + LOAD_NUMERIC + LINK_NUMERIC + RECOVERY_NUMERIC
# integer columns keep exact values (start_ns/end_ns exceed float64's 2^53) as nullable Int64
INTEGER = tuple(c.name for c in columns.COLUMNS if c.type == "int" and c.group != "passthrough")
TEXT = tuple(c.name for c in columns.COLUMNS if c.type == "text" and c.group != "passthrough")
BOOLEAN = tuple(c.name for c in columns.COLUMNS if c.type == "bool")
JSON = tuple(c.name for c in columns.COLUMNS if c.type == "json")


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
    known = set(NUMERIC + OPTIONAL_NUMERIC + TEXT + BOOLEAN + JSON)
    # the schema's columns a run never filled, added at once (one by one fragments the frame)
    missing = {c: (pd.Series(pd.array([None] * len(df), dtype="Int64"), index=df.index) if c in INTEGER
                   else pd.Series(np.nan, index=df.index, dtype=float))
               for c in NUMERIC + OPTIONAL_NUMERIC if c not in df}
    missing.update({c: pd.Series([None] * len(df), index=df.index, dtype=object) for c in TEXT + JSON if c not in df})
    missing.update({c: pd.Series(False, index=df.index, dtype=bool) for c in BOOLEAN if c not in df})
    if missing:
        df = pd.concat([df, pd.DataFrame(missing, index=df.index)], axis=1)
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
    for c in JSON:     # kept as JSON text: one type per column in the table and in parquet
        df[c] = (df[c].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v))
                           else json.dumps(v, sort_keys=True)) if c in df else None)
    for c in BOOLEAN:
        df[c] = df[c].map(lambda v: bool(v) if v is not None and not (isinstance(v, float) and math.isnan(v))
                          else False).astype(bool) if c in df else False
    df["protocol"] = df["protocol"].fillna("?")
    # a plan that sweeps servers runs one protocol on several servers: those are different
    # stacks, so their cells must not be pooled; they are named "<protocol>@<server>"
    servers_per_proto = df.groupby("protocol")["server"].nunique() if len(df) else pd.Series(dtype=int)
    swept = set(servers_per_proto[servers_per_proto > 1].index)
    # likewise a plan that compares clients (client = [...]) measures one protocol with several
    # client stacks: "<protocol>~<client>", e.g. h3~qb-load and h3~curl. Only several clients of
    # one workload compare: a plan of page loads (browser) and plays (video) has one each
    if len(df):
        clients_per_cell = df.groupby(["protocol", "workload"], dropna=False)["client"].nunique()
        compared = set(clients_per_cell[clients_per_cell > 1].index.get_level_values("protocol"))
    else:
        compared = set()
    if swept:
        mask = df["protocol"].isin(swept) & df["server"].notna()
        df.loc[mask, "protocol"] = df.loc[mask, "protocol"] + "@" + df.loc[mask, "server"].astype(str)
    # a plan that sweeps congestion control (quic_cc for h3, tcp_cc for h1/h2) runs one protocol
    # with several senders: "<protocol>[@server]/<cc>", e.g. h3@ngtcp2/bbr, h2/bbr
    if len(df):
        base = df["protocol"].str.split("@").str[0]
        cc = df["quic_cc"].where(base == "h3", df["tcp_cc"])
        ccs_per_proto = cc.groupby(base).nunique()
        by_cc = base.isin(set(ccs_per_proto[ccs_per_proto > 1].index)) & cc.notna()
        df.loc[by_cc, "protocol"] = df.loc[by_cc, "protocol"] + "/" + cc[by_cc].astype(str)
    if compared:
        mask = df["protocol"].str.split(r"[@/]", regex=True).str[0].isin(compared) & df["client"].notna()
        df.loc[mask, "protocol"] = df.loc[mask, "protocol"] + "~" + df.loc[mask, "client"].astype(str)
    df["condition"] = df["condition"].fillna("?")
    df["status"] = df["status"].fillna("failed")
    df["workload"] = df.apply(_workload_label, axis=1) if len(df) else df["workload"]
    missing_key = df["key"].isna()
    if missing_key.any():
        parts = df.loc[missing_key, ["condition", "workload", "protocol", "server", "rep"]]
        df.loc[missing_key, "key"] = ["|".join("" if pd.isna(v) else str(v) for v in r)
                                      for r in parts.itertuples(index=False)]
    df = df.copy()          # one block again before the derived columns go in
    # the columns derived from the rows, each by its declared derivation (model/columns.py): the
    # row's position, whether a retry (--retry-failed appends a row with the same key) superseded
    # it, whether the statistics use it, and the per-row metrics (CPU per GB, server wait)
    for col in (*columns.derived("run"), *columns.derived("row")):
        df[col.name] = col.derivation.compute(df)
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
        # rows written before connection policies existed used what is now called "shared"
        policy = self.rows.groupby("workload")["connection_policy"].first()
        w["connection_policy"] = [policy.get(x) or "shared" for x in w.index]
        kind = self.rows.groupby("workload")["kind"].first()
        w["kind"] = [kind.get(x) or "objects" for x in w.index]
        resumption = self.rows.groupby("workload")["resumption"].first() if "resumption" in self.rows else {}
        w["resumption"] = [resumption.get(x) or "none" for x in w.index]
        return w

    def kind_of(self, workload: str) -> str:
        """The workload's kind (model/workload_kinds.py)."""
        try:
            return str(self.workload_info.at[workload, "kind"])
        except KeyError:
            return "objects"

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
    layout = RunLayout(d)
    # a published run (quicbench results publish) keeps its rows compressed
    trials = d / "trials.jsonl.gz" if not layout.trials.exists() and (d / "trials.jsonl.gz").exists() \
        else layout.trials
    if not layout.meta.exists() and not trials.exists():
        raise QuicbenchError(f"'{d}' is not a quicbench run directory (no meta.json, no trials.jsonl)")
    notes = []
    meta: dict[str, Any] = {}
    if layout.meta.exists():
        meta = read_meta(layout)        # a malformed one is refused, naming it
    else:
        notes.append("meta.json is missing: no plan, versions or host facts")
    read = read_jsonl_checked(confined(d, trials))
    if not trials.exists():
        notes.append("trials.jsonl is missing: the run recorded no trial")
    if read.torn:
        notes.append(f"trials.jsonl has {len(read.torn)} unreadable line(s) (line {', '.join(map(str, read.torn[:5]))}): "
                     f"a write was torn; those trials are missing and a resume runs them again")
    return RunData(d, meta, frame_from_rows(with_kinds(read.rows, meta)), notes)


def with_kinds(rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows written before the `kind` column get their workload's kind from the run's plan
    (objects when the plan does not name the workload)."""
    if all(r.get("kind") for r in rows):
        return rows
    kinds: dict[str, str] = {}
    if isinstance(meta.get("plan"), dict):
        from quicbench.model.plan import plan_from_dict
        try:
            kinds = {w.label: w.kind for w in plan_from_dict(meta["plan"]).workloads}
        except QuicbenchError:
            pass
    return [r if r.get("kind") else {**r, "kind": kinds.get(str(r.get("workload")), "objects")} for r in rows]
