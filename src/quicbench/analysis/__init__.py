"""Analysis of a run's trials: loading, statistics, per-cell tables, seed reference data."""

from quicbench.analysis.compare import compare_cells, setup_differences
from quicbench.analysis.load import PROTOCOL_NAMES, PROTOCOL_ORDER, RunData, load_run
from quicbench.analysis.tables import METRICS, SUMMARY_COLUMNS, Method, best_protocols, cell_summary, pairwise

__all__ = ["RunData", "load_run", "Method", "cell_summary", "best_protocols", "pairwise", "compare_cells",
           "setup_differences", "METRICS", "SUMMARY_COLUMNS", "PROTOCOL_ORDER", "PROTOCOL_NAMES"]
