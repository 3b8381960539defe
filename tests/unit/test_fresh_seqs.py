"""More repetitions renumber a plan's expansion; a trial directory is never given to another trial."""

from quicbench.model.plan import expand, plan_from_dict
from quicbench.run.runner import fresh_seqs

PLAN = {"name": "s", "protocols": ["h1", "h2"], "repetitions": 2,
        "workloads": [{"size": "10KB"}, {"size": "100KB"}], "conditions": [{"name": "a"}]}


def test_grown_repetitions_never_reuse_a_recorded_trials_directory():
    plan = plan_from_dict(PLAN)
    first = expand(plan)                       # 2 workloads x 2 reps x 2 protocols
    rows = [{"key": t.key, "seq": t.seq} for t in first]
    more = expand(plan, reps=3)                # the 100KB cells now start later: seqs moved
    todo = fresh_seqs([t for t in more if t.key not in {r["key"] for r in rows}], rows, more)
    taken = {r["seq"] for r in rows}
    assert len(todo) == 4 and not {t.seq for t in todo} & taken
    assert len({t.seq for t in todo}) == 4
    # a trial that already has a row (a retried failure) keeps its own directory number
    again = fresh_seqs([first[0]], rows, more)
    assert again[0].seq == first[0].seq
