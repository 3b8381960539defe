"""The machine-readable outputs: summary.csv (one row per cell) and trials.parquet (every row).

Their columns are documented in docs/data.md; tests check the two agree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from quicbench.analysis.load import RunData
from quicbench.model import columns


def trials_frame(run: RunData) -> pd.DataFrame:
    """Every row of trials.jsonl, normalised, with the derived columns and the condition's numbers."""
    df = run.rows.copy()
    params = run.conditions
    for col in columns.derived("condition"):      # the condition's numbers (model/columns.py)
        param = col.derivation.inputs[0]
        df[col.name] = df["condition"].map(params[param]) if not params.empty else float("nan")
        df[col.name] = pd.to_numeric(df[col.name], errors="coerce")
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
