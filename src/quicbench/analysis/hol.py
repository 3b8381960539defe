"""Head-of-line blocking per protocol (issue 28.2): how long objects stood still, per cell, and
HTTP/3 against HTTP/2 on each measure, for object and page workloads.

The trials' measures come from the client's per-request records (run/metrics.py):
``all_streams_idle_ms`` (every stream in flight on a connection stood still together),
``body_stall_ms_p50`` / ``body_stall_ms_max`` (each body's longest gap after its first byte) and
``completion_spread_ms`` (p90 − p10 of the objects' completion times). The section is one
declaration of analysis/measures.py (HOL), computed as every measure section is: per cell the
mean with its 95 % interval, h3 against h2 (each server or client of a sweep against its own),
Holm-corrected over the section. What the measures isolate is said in HOL_TEXT.
"""

from __future__ import annotations

from quicbench.analysis.load import RunData
from quicbench.analysis.measures import HOL, HOL_METRICS, HOL_TEXT, NOT_TESTED, MeasureData, compute, protocol_pairs
from quicbench.analysis.tables import Method

HolData = MeasureData

__all__ = ["HOL_METRICS", "HOL_TEXT", "NOT_TESTED", "HolData", "head_of_line", "protocol_pairs"]


def head_of_line(run: RunData, method: Method = Method()) -> MeasureData:
    """The section's data: workloads of several objects (a page, or two objects or more); empty
    when no successful trial of such a workload has a HOL measure."""
    return compute(run, HOL, method)
