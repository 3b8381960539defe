"""The machine-readable outputs: summary.csv (one row per cell) and trials.parquet (every row).

Their columns are documented in docs/data.md; tests check the two agree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from quicbench.analysis.load import RunData

DERIVED_TRIAL_COLUMNS = ["row_index", "superseded", "used", "client_cpu_s_per_gb", "server_cpu_s_per_gb",
                         "cpu_s_per_gb", "wait_ms", "delay_ms", "loss_pct", "rate_mbit"]


def trials_frame(run: RunData) -> pd.DataFrame:
    """Every row of trials.jsonl, normalised, with the derived columns and the condition's numbers."""
    df = run.rows.copy()
    params = run.conditions
    for c in ("delay_ms", "loss_pct", "rate_mbit"):
        df[c] = df["condition"].map(params[c]) if not params.empty else float("nan")
        df[c] = pd.to_numeric(df[c], errors="coerce")
    for c in df.columns:
        if df[c].dtype == object:
            if df[c].map(lambda v: isinstance(v, (dict, list))).any():
                df[c] = df[c].map(lambda v: json.dumps(v) if isinstance(v, (dict, list)) else v)
            kinds = {type(v) for v in df[c] if v is not None}
            if len(kinds) > 1:
                df[c] = df[c].map(lambda v: None if v is None else str(v))
    return df


def write_summary_csv(summary: pd.DataFrame, path: Path) -> Path:
    summary.to_csv(path, index=False)
    return path


def write_trials_parquet(run: RunData, path: Path) -> Path:
    trials_frame(run).to_parquet(path, index=False)
    return path
