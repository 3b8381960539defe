"""--until-decided: which cells are still undecided, and the design of the looks.

A run with ``--until-decided MAX`` looks at its data after the plan's repetitions and after every
``step`` more (step = the plan's repetitions), at most ``looks`` times (up to MAX repetitions).
Each look tests at alpha / looks: Bonferroni alpha spending over the looks, so the chance of any
false "different" (or false "equivalent") over all of them stays at most alpha, whatever the
data make the run do (the union bound needs no independence between looks). It is conservative
next to group-sequential boundaries (O'Brien-Fleming, Pocock), which need equal spacing and a
known information fraction that per-cell stopping does not give.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from quicbench.analysis.load import RunData
from quicbench.analysis.tables import Method, best_protocols
from quicbench.model.workload_kinds import KINDS
from quicbench.stats import DIFFERENT, EQUIVALENT


@dataclass(frozen=True)
class Design:
    reps: int         # the plan's repetitions: the first look
    max_reps: int
    step: int

    @property
    def looks(self) -> int:
        return 1 + math.ceil((self.max_reps - self.reps) / self.step)

    def as_meta(self, alpha: float) -> dict:
        return {"reps": self.reps, "max_reps": self.max_reps, "step": self.step, "looks": self.looks,
                "alpha": alpha, "alpha_per_look": alpha / self.looks,
                "method": "Bonferroni alpha spending over the looks", "looked": []}


def design(reps: int, max_reps: int) -> Design:
    return Design(reps=reps, max_reps=max_reps, step=max(1, reps))


def undecided_cells(run: RunData, method: Method) -> set[tuple[str, str]]:
    """(condition, workload) cells whose best protocol is neither different from nor equivalent to
    every other protocol, on the headline metric of the workload's kind."""
    out: set[tuple[str, str]] = set()
    for kind in KINDS:
        head = kind.headline()
        if head.name not in run.rows:
            continue
        best = best_protocols(run, method, metric=head.name, higher_is_better=head.higher_is_better)
        for _, b in best.iterrows():
            if run.kind_of(b["workload"]) != kind.name:
                continue
            if any(t.verdict not in (DIFFERENT, EQUIVALENT) for t in b["tests"].values()):
                out.add((b["condition"], b["workload"]))
    return out
