"""issue 42 items 2 and 3: a plan resolved into specs, client capabilities told to the model as a
client registers, and workload kinds that own their rules (no branch on a kind's name outside
the kinds)."""

import re
from pathlib import Path

import pytest

import quicbench.clients  # noqa: F401 - the drivers declare their capabilities as they register
from quicbench.clients import CLIENTS
from quicbench.clients.loadclient import LoadClient
from quicbench.errors import QuicbenchError
from quicbench.model.capabilities import client_capabilities
from quicbench.model.plan import expand, plan_from_dict
from quicbench.model.shard import Selection, Shard
from quicbench.model.specs import LabSpec, RunSpec

PLAN = {"name": "s", "protocols": ["h1", "h3"], "repetitions": 2, "hops": 2, "tcp_cc": ["cubic", "reno"],
        "tcp_initcwnd": 20, "link": "linkem", "link_seed": True, "qlog": "auto", "trial_timeout_s": 30.0,
        "workloads": [{"size": "10KB", "count": 2}, {"kind": "video", "mode": "live", "duration_s": 8}],
        "conditions": [{"name": "a"}, {"name": "b", "loss_pct": 1}]}
SRC = Path(__file__).resolve().parents[2] / "src" / "quicbench"


def test_a_selection_resolves_into_the_specs_run_sees():
    plan = plan_from_dict(PLAN)
    sel = Selection(reps=1, only={"condition": ["b"]}, shard=Shard(1, 2))
    run = sel.resolve(plan)
    assert isinstance(run, RunSpec) and isinstance(run.lab, LabSpec)
    assert [t.key for t in run.trials] == [t.key for t in sel.trials(plan)]
    assert (run.lab.hops, run.lab.tcp_cc, run.lab.tcp_initcwnd, run.lab.link) == (2, "cubic", 20, "linkem")
    assert [c.name for c in run.conditions] == ["a", "b"]         # a lab is made for every condition
    assert run.content.videos and run.content.objects == plan.content_objects()
    assert run.seed == plan.seed and run.link_seed and run.trial_timeout_s == 30.0
    assert not run.qlog_for(plan.conditions[0]) and run.qlog_for(plan.conditions[1])   # auto: the lossy one
    assert run.meta["plan"]["name"] == "s" and set(run.meta["conditions"]) == {"a", "b"}
    assert run.meta["shard"] == sel.as_meta(plan)["shard"] and run.meta["reps"] == 1


def test_a_client_registered_later_is_offered_only_its_protocols():
    class H2Only(LoadClient):
        name = "h2-only-test"
        protocols = frozenset({"h2"})

    plan = plan_from_dict({"protocols": ["h1", "h2", "h3"], "client": ["qb-load", "h2-only-test"],
                           "workloads": [{"size": "1KB"}]})
    CLIENTS.register(H2Only)
    try:
        assert client_capabilities("h2-only-test").protocols == {"h2"}
        assert {t.protocol for t in expand(plan) if t.client == "h2-only-test"} == {"h2"}
    finally:
        CLIENTS._drivers.pop("h2-only-test")


def test_a_kind_checks_its_own_parameters():
    with pytest.raises(QuicbenchError, match="har: a page archive is loaded by kind = \"page\" workloads"):
        plan_from_dict({"workloads": [{"kind": "video", "har": "x.har"}]})
    with pytest.raises(QuicbenchError, match="workloads"):
        plan_from_dict({"workloads": [{"kind": "video", "codec": "mpeg2"}]})
    plan_from_dict({"workloads": [{"kind": "objects", "codec": "mpeg2"}]})    # a video's field: not the objects'


def test_no_branch_on_a_workload_kind_name_outside_the_kinds():
    # w.kind, run.kind_of(w), x.map(run.kind_of), info.at[w, "kind"], row.get("kind", ...) compared
    # with a kind's name
    kind = r"""(\.kind|kind_of\([^)]*\)|kind_of\)|["']kind["']\]|\.get\(["']kind["'][^)]*\))"""
    branch = re.compile(kind + r"""\s*(==|!=)\s*["'](objects|page|video)["']""")
    found = [f"{p.relative_to(SRC)}:{n}" for p in SRC.rglob("*.py") if p.name != "workload_kinds.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if branch.search(line)]
    assert found == []


def test_preflight_checks_the_resolved_run_the_plans_factors_whatever_the_selection():
    from quicbench.run.preflight import check_run
    cmd = {"command": "/bin/true {url}", "protocols": ["h1", "h3"]}
    plan = plan_from_dict({"protocols": ["h1", "h3"], "client": ["here", "nowhere"],
                           "client_commands": {"here": cmd, "nowhere": {**cmd, "command": "/nonexistent/get {url}"}},
                           "workloads": [{"size": "1KB"}], "quic_cc": "bbr"})
    m = Selection().resolve(plan).matrix
    assert m.clients == {"1x1KB/p1": ("here", "nowhere")}
    assert (m.servers, m.quic_ccs) == ({"h1": ("caddy",), "h3": ("caddy",)}, {"caddy": ("bbr",)})
    # what the plan asks is checked whichever trials are selected: h1 alone still asks bbr of caddy
    with pytest.raises(QuicbenchError, match="quic_cc: caddy cannot set its QUIC sender to 'bbr'"):
        check_run(Selection(only={"protocol": ["h1"]}).resolve(plan), "p.toml")
    # installed: the drivers of the selected trials, so a client no selected trial uses may be missing
    plan = plan_from_dict({**plan.model_dump(exclude_defaults=True), "quic_cc": None})
    with pytest.raises(QuicbenchError, match="p.toml: client nowhere cannot run on this host"):
        check_run(Selection().resolve(plan), "p.toml", installed=True)
    check_run(Selection(only={"client": ["here"]}).resolve(plan), "p.toml", installed=True)
