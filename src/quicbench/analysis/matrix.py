"""The stack matrix: HTTP/3 goodput per sender (server) × receiver (client), against TCP.

A run whose h3 trials have several senders and several receivers (plans/matrix.toml: several
``servers.h3`` and ``client = [...]``) gets one grid per condition and workload: senders as rows,
receivers as columns — the QUIC interop runner's grid, for performance. Each cell is the pair's
goodput (its geometric mean with that mean's 95 % CI, n, as Table 1) and its verdict against the TCP reference of the
same condition and workload: the h1/h2 cell (protocol × TCP congestion control × client) with the
highest geometric mean goodput, so that "faster" means faster than the best TCP the run measured.
The verdict is the report's (``Method.compare``: the ratio of geometric means with its interval at the verdict's level,
different / equivalent / inconclusive), Holm-corrected over the grid's cells. A cell also carries
what explains it: CPU seconds per GB at the sender and at the receiver, the share of the sender's
loss declarations that were spurious (where its qlog says), the receiver's ACK frequency (packets
received per ACK it sent, from its qlog), the flow-control BLOCKED frames the sender sent per trial
(its qlog), and its CPU-bound, link-late and failed trials. The grid also keeps every TCP cell
(the reference among them) with the same facts, and how many of its trials were CPU-bound: where
all were (a fast path on a small machine), CPU per GB at each end is the measurement.

    grids_from_rows(frame, method) -> list[MatrixGrid]     (frame: analysis.load's rows)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from quicbench import stats
from quicbench.analysis.tables import Method

TCP = ("h1", "h2")


@dataclass(frozen=True)
class MatrixCell:
    sender: str
    receiver: str
    n: int                                 # successful trials
    failed: int                            # failed trials of the pair
    mean: float | None                     # goodput, geometric mean (Mbit/s), as Table 1
    ci_low: float | None
    ci_high: float | None
    verdict: str                           # against the reference (stats' verdicts)
    ratio: float | None = None             # cell / reference, ratio of geometric means
    ratio_low: float | None = None
    ratio_high: float | None = None
    p: float | None = None                 # Holm-adjusted over the grid
    reps_to_decide: int | None = None
    cpu_bound: int = 0
    link_late: int = 0
    sender_cpu_s_per_gb: float | None = None
    receiver_cpu_s_per_gb: float | None = None
    spurious_share: float | None = None    # quic_lost_spurious / quic_lost over the cell's trials
    ack_ratio: float | None = None         # packets the receiver got per packet it sent with an ACK (its qlog)
    fc_blocked: float | None = None        # DATA_BLOCKED + STREAM_DATA_BLOCKED frames the sender sent, per trial
    server_stack: str | None = None
    client_stack: str | None = None
    trials: tuple[int, ...] = ()           # the successful trials' seq (their directories: trials/<seq>)

    @property
    def tone(self) -> str:
        """The cell's colour class: faster, slower, equivalent, inconclusive, few (n too small)."""
        if self.verdict == stats.DIFFERENT and self.ratio is not None:
            return "faster" if self.ratio > 1 else "slower"
        if self.verdict in (stats.EQUIVALENT, stats.INCONCLUSIVE):
            return self.verdict
        return "few"


@dataclass
class MatrixGrid:
    condition: str
    workload: str
    senders: list[str]
    receivers: list[str]
    cells: dict[tuple[str, str], MatrixCell] = field(default_factory=dict)
    reference: str | None = None           # the TCP cell the verdicts are against, e.g. 'h2/bbr'
    reference_mean: float | None = None
    reference_n: int = 0
    n_tests: int = 0
    tcp: dict[str, MatrixCell] = field(default_factory=dict)   # every TCP cell by its label ('h2/bbr'), unjudged
    trials: int = 0                        # successful trials of the grid, h3 and TCP
    cpu_bound: int = 0                     # of those, CPU-bound

    @property
    def all_cpu_bound(self) -> bool:
        """Every successful trial of the grid was CPU-bound: the ends' CPUs may have set every pace."""
        return self.trials > 0 and self.cpu_bound == self.trials

    def anchor(self, sender: str, receiver: str) -> str:
        """The HTML id of a cell's details row."""
        return "mx-" + re.sub(r"[^A-Za-z0-9_-]+", "-", f"{self.condition}-{self.workload}-{sender}-{receiver}")


def base_protocol(label: str) -> str:
    """'h3@ngtcp2/bbr~aioquic' -> 'h3' (the frame's protocol column names the stacks of swept cells)."""
    return re.split(r"[@/~]", str(label), maxsplit=1)[0]


def _mean(values: pd.Series) -> float | None:
    """The geometric mean (the value the interval and the ratio are for); the arithmetic mean when a
    value is 0."""
    v = stats.clean(pd.to_numeric(values, errors="coerce"))
    if not v.size:
        return None
    g = stats.gmean(v)
    return g if g == g else float(v.mean())


def _ratio(rows: pd.DataFrame, num: str, den: str) -> float | None:
    """sum(num) / sum(den) over the rows that have both (None without any)."""
    if num not in rows or den not in rows:
        return None
    both = rows[[num, den]].apply(pd.to_numeric, errors="coerce").dropna()
    total = both[den].sum()
    return float(both[num].sum() / total) if total else None


def _senders(h3: pd.DataFrame) -> pd.Series:
    """A sender's label: its server, and its QUIC congestion controller where the run sweeps it."""
    cc = h3["quic_cc"].astype(object)
    swept = cc.groupby(h3["server"]).nunique() > 1
    label = h3["server"].astype(str)
    with_cc = h3["server"].map(swept).fillna(False).astype(bool) & cc.notna()
    return label.where(~with_cc, label + "/" + cc.astype(str))


def _references(tcp: pd.DataFrame) -> pd.Series:
    """A TCP cell's label: 'h2/cubic', with the client and server where the run has several."""
    label = tcp["_base"] + "/" + tcp["tcp_cc"].fillna("?").astype(str)
    if tcp["client"].nunique() > 1:
        label = label + "~" + tcp["client"].astype(str)
    if tcp["server"].nunique() > 1:
        label = label + "@" + tcp["server"].astype(str)
    return label


def has_matrix(frame: pd.DataFrame) -> bool:
    """Several h3 senders and several h3 receivers: the run is a stack matrix."""
    if frame.empty or "protocol" not in frame:
        return False
    h3 = frame[frame["protocol"].map(base_protocol) == "h3"]
    return h3["server"].nunique() > 1 and h3["client"].nunique() > 1


def _reference(tcp: pd.DataFrame, labels: pd.Series, metric: str, min_n: int) -> tuple[str, pd.Series] | None:
    """The TCP cell the grid's verdicts are against: the highest geometric mean among the cells with at
    least min_n trials (any cell when none has): its label and its values. labels: each row's cell."""
    if tcp.empty:
        return None
    means = tcp.groupby(labels)[metric].apply(_mean).dropna()
    counts = tcp.groupby(labels)[metric].count().reindex(means.index)
    if (counts >= min_n).any():
        means = means[counts >= min_n]
    if means.empty:
        return None
    best = str(means.idxmax())
    return best, tcp.loc[labels == best, metric]


def _per_trial(rows: pd.DataFrame, column: str) -> float | None:
    """The mean of a count over the trials that have it (None where none does)."""
    if column not in rows:
        return None
    v = pd.to_numeric(rows[column], errors="coerce").dropna()
    return float(v.mean()) if v.size else None


def _first_text(values: pd.Series) -> str | None:
    return next((x for x in values if isinstance(x, str)), None)


def _cell_facts(sender: str, receiver: str, rows: pd.DataFrame, metric: str) -> dict:
    """What a cell shows besides its verdict, from the pair's rows (failed ones included)."""
    ok = rows[rows["used"]]
    values = ok[metric]
    summary = stats.summarize(values, positive=True)
    per_gb = 1e9          # CPU seconds per byte -> per GB
    sender_cpu, receiver_cpu = _ratio(ok, "server_cpu_s", "bytes"), _ratio(ok, "client_cpu_s", "bytes")
    return dict(sender=sender, receiver=receiver, n=int(values.notna().sum()),
                failed=int((rows["status"] != "ok").sum()), mean=_mean(values), ci_low=stats.finite(summary.ci_low), ci_high=stats.finite(summary.ci_high),
                cpu_bound=int(ok["cpu_bound"].sum()), link_late=int(ok["link_late"].sum()),
                sender_cpu_s_per_gb=None if sender_cpu is None else sender_cpu * per_gb,
                receiver_cpu_s_per_gb=None if receiver_cpu is None else receiver_cpu * per_gb,
                spurious_share=_ratio(ok, "quic_lost_spurious", "quic_lost"),
                ack_ratio=_ratio(ok, "quic_client_received", "quic_client_acks_sent"),
                fc_blocked=_per_trial(ok, "quic_fc_blocked"),
                server_stack=_first_text(rows["server_stack"]), client_stack=_first_text(rows["client_stack"]),
                trials=tuple(int(x) for x in ok["seq"].dropna()))


def grids_from_rows(frame: pd.DataFrame, method: Method = Method(), metric: str = "goodput_mbps") -> list[MatrixGrid]:
    """One grid per condition × workload of a stack-matrix run (none otherwise). frame: the run's
    rows as analysis.load gives them (``used`` marks the successful, final, measured trials)."""
    if not has_matrix(frame):
        return []
    df = frame[~frame["warmup"] & ~frame["superseded"]].copy()
    df["_base"] = df["protocol"].map(base_protocol)
    grids = []
    for (cond, wl), g in df.groupby(["condition", "workload"], sort=False):
        h3 = g[g["_base"] == "h3"].copy()
        if h3.empty:
            continue
        h3["_sender"] = _senders(h3)
        grid = MatrixGrid(str(cond), str(wl), sorted(h3["_sender"].unique()), sorted(h3["client"].astype(str).unique()))
        tcp = g[g["_base"].isin(TCP)]
        labels = _references(tcp) if not tcp.empty else pd.Series(dtype=object)
        ref = _reference(tcp[tcp["used"]], labels[tcp["used"]] if not tcp.empty else labels, metric, method.min_n)
        if not tcp.empty:
            for label, rows in tcp.groupby(labels, sort=True):
                receiver = _first_text(rows["client"].astype(str)) or "?"
                grid.tcp[str(label)] = MatrixCell(**_cell_facts(str(label), receiver, rows, metric), verdict="")
        used = g[g["used"]]
        grid.trials, grid.cpu_bound = len(used), int(used["cpu_bound"].sum())
        ref_values = None
        if ref is not None:
            grid.reference, ref_values = ref
            grid.reference_mean, grid.reference_n = _mean(ref_values), int(ref_values.notna().sum())
        pending = []
        for (s, r), rows in h3.groupby(["_sender", "client"], sort=True):
            facts = _cell_facts(str(s), str(r), rows, metric)
            test = method.compare(rows.loc[rows["used"], metric], ref_values, metric) if ref is not None else None
            pending.append(((str(s), str(r)), facts, test))
        tested = [t for _, _, t in pending if t is not None]
        adjusted = iter(stats.adjust(tested, method.correction) if tested else [])
        grid.n_tests = sum(1 for t in tested if t.p is not None)
        for key, facts, test in pending:
            if test is None:
                grid.cells[key] = MatrixCell(**facts, verdict=stats.N_TOO_SMALL)
                continue
            t = next(adjusted)
            grid.cells[key] = MatrixCell(**facts, verdict=t.verdict, ratio=t.ratio, ratio_low=t.ratio_low,
                                         ratio_high=t.ratio_high, p=t.p, reps_to_decide=t.reps_to_decide)
        grids.append(grid)
    return grids
