import textwrap
from collections import Counter

import pytest

from quicbench.errors import QuicbenchError
from quicbench.model.plan import DEFAULT_PLAN, expand, load_plan, plan_from_dict
from quicbench.run.preflight import check_plan


def load_checked(p):
    """A plan as `quicbench run` takes it: the model's checks, then the drivers'."""
    plan = load_plan(p)
    check_plan(plan, str(p))
    return plan


def write(tmp_path, text):
    p = tmp_path / "p.toml"
    p.write_text(textwrap.dedent(text))
    return p


def test_default_plan_expands():
    plan = plan_from_dict(DEFAULT_PLAN)
    trials = expand(plan)
    n = len(plan.conditions) * len(plan.workloads) * plan.repetitions
    assert len(plan.conditions) >= 3 and len(trials) == 3 * n
    assert len({t.key for t in trials}) == len(trials)
    assert Counter(t.protocol for t in trials) == {"h1": n, "h2": n, "h3": n}


def test_order_reproducible_from_seed_and_protocols_back_to_back():
    plan = plan_from_dict({**DEFAULT_PLAN, "seed": 42, "repetitions": 5})
    a, b = expand(plan), expand(plan)
    assert [t.key for t in a] == [t.key for t in b]
    other = expand(plan_from_dict({**DEFAULT_PLAN, "seed": 43, "repetitions": 5}))
    assert [t.key for t in a] != [t.key for t in other]
    # each cell's three protocols are consecutive
    for i in range(0, len(a), 3):
        cell = a[i:i + 3]
        assert len({(t.workload.label, t.rep) for t in cell}) == 1
        assert {t.protocol for t in cell} == {"h1", "h2", "h3"}


# two workloads on one condition (the shape the tests below count on)
TWO_WORKLOADS = {"name": "default", "protocols": ["h1", "h2", "h3"], "repetitions": 3,
                 "workloads": [{"size": "100KB", "count": 10}, {"size": "1MB", "count": 4}]}


def test_only_and_reps():
    plan = plan_from_dict(TWO_WORKLOADS)
    trials = expand(plan, reps=1, only={"protocol": ["h3"], "size": ["1MB"]})
    assert [(t.protocol, t.workload.size) for t in trials] == [("h3", "1MB")]
    # a size in any spelling that means the same bytes names the same workloads
    assert expand(plan, reps=1, only={"protocol": ["h3"], "size": ["1000000B"]}) == trials
    with pytest.raises(QuicbenchError, match="size=2MB: plan 'default' has no such size; accepted: 100KB, 1MB"):
        expand(plan, only={"size": ["2MB"]})
    with pytest.raises(QuicbenchError, match="unknown field"):
        expand(plan, only={"colour": ["red"]})
    with pytest.raises(QuicbenchError, match="protocol=h4: plan 'default' has no such protocol; accepted: h1, h2, h3"):
        expand(plan, only={"protocol": ["h4"]})


@pytest.mark.parametrize("body,needle", [
    ('protocols = ["h4"]\n[[workloads]]\nsize = "1MB"', "protocols.0: Input should be 'h1', 'h2' or 'h3'"),
    ('[[workloads]]\nsize = "1XB"', "workloads.0.size: bad size '1XB'"),
    ('[[workloads]]\nsize = "1MB"\ncount = 0', "workloads.0.count"),
    ('[[workloads]]\nsize = "1MB"\nparallel = 0', "parallel must be 1 to 100000"),
    ('repetitions = 0\n[[workloads]]\nsize = "1MB"', "repetitions"),
    ('protocols = []\n[[workloads]]\nsize = "1MB"', "protocols"),
    ('colour = "red"\n[[workloads]]\nsize = "1MB"', "unknown key 'colour'; accepted: name, description, protocols"),
    ('', "workloads: Field required"),
    ('[[workloads]]\nsize = "1MB"\n[[conditions]]\nname = "a"\n[[conditions]]\nname = "a"', "names must be unique"),
    ('[[workloads]]\nsize = "1MB"\n[[conditions]]\nname = "a"\nloss_pct = 101', "conditions.0"),
    ('[servers]\nh3 = "nosuch"\n[[workloads]]\nsize = "1MB"', "servers.h3: unknown server 'nosuch'"),
    ('[[workloads]\nsize = "1MB"', "not valid TOML"),
    ('offload = true\ncapture = true\n[[workloads]]\nsize = "1MB"', "capture with offload = false"),
    ('link = "wormhole"\n[[workloads]]\nsize = "1MB"', "link: unknown link emulator 'wormhole', accepted: auto"),
    ('tcp_cc = "warp"\n[[workloads]]\nsize = "1MB"', "tcp_cc: 'warp' is not available in this kernel; accepted:"),
    ('client = "curl"\n[[workloads]]\nsize = "1MB"', "unknown client 'curl' (for 1x1MB/p1), accepted: aioquic, browser, command, firefox, firefox-video, netty, ngtcp2, qb-load"),
    ('[[workloads]]\nsize = "1MB"\nconnections = "pool:0"', "connections must be one of shared, per-object or pool:N"),
    ('[[workloads]]\nsize = "1MB"\nconnections = "pool:x"', "connections must be one of"),
    ('[[workloads]]\nsize = "1MB"\nconnections = "many"', "connections must be one of"),
    ('[[workloads]]\nkind = "page"\nconnections = "per-object"', "a page load lets the browser manage"),
])
def test_bad_plans_name_file_and_field(tmp_path, body, needle):
    p = write(tmp_path, body)
    with pytest.raises(QuicbenchError) as e:
        load_checked(p)
    assert str(p) in str(e.value) or "not valid TOML" in str(e.value)
    assert needle in str(e.value)


def test_missing_plan_file(tmp_path):
    with pytest.raises(QuicbenchError, match="not found"):
        load_plan(tmp_path / "nope.toml")


def test_server_sweep_expands_per_protocol():
    plan = plan_from_dict({**TWO_WORKLOADS, "servers": {"h1": ["caddy", "nginx", "apache"], "h2": ["caddy", "nginx"]},
                           "repetitions": 2})
    trials = expand(plan)
    combos = Counter((t.protocol, t.server) for t in trials)
    assert combos == {("h1", "caddy"): 4, ("h1", "nginx"): 4, ("h1", "apache"): 4, ("h2", "caddy"): 4,
                      ("h2", "nginx"): 4, ("h3", "caddy"): 4}
    assert len({t.key for t in trials}) == len(trials)
    only = expand(plan, only={"server": ["nginx"]})
    assert {t.server for t in only} == {"nginx"}
    with pytest.raises(QuicbenchError, match="servers.h3: nginx cannot serve h3; servers that can: aioquic, caddy"):
        check_plan(plan_from_dict({**DEFAULT_PLAN, "servers": {"h3": ["caddy", "nginx"]}}))


def test_h2_parallelism_beyond_server_streams_rejected():
    with pytest.raises(QuicbenchError, match="parallel <= 250"):
        plan_from_dict({"workloads": [{"size": "10KB", "count": 300}]})
    plan_from_dict({"protocols": ["h1", "h3"], "workloads": [{"size": "10KB", "count": 300}]})


def test_connection_policies_label_and_expand():
    plan = plan_from_dict({"workloads": [{"size": "1MB", "count": 4, "connections": "per-object"},
                                         {"size": "1MB", "count": 4, "connections": "pool:2"},
                                         {"size": "1MB", "count": 4}]})
    assert [w.label for w in plan.workloads] == ["4x1MB/p4/per-object", "4x1MB/p4/pool2", "4x1MB/p4"]
    assert len({t.key for t in expand(plan)}) == len(expand(plan)) == 3 * 3 * 3


def test_every_preset_loads_and_expands():
    """Every plan file in plans/ is valid, passes the driver checks and expands (as Flent tests its .conf)."""
    from pathlib import Path
    presets = sorted((Path(__file__).resolve().parents[2] / "plans").glob("*.toml"))
    assert len(presets) >= 7
    for path in presets:
        plan = load_checked(path)
        trials = expand(plan)
        assert trials and len({t.key for t in trials}) == len(trials), path.name


def test_trace_paths_resolve_relative_to_the_plan(tmp_path, monkeypatch):
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "t.trace").write_text("1\n2\n3\n")
    p = tmp_path / "plans" / "p.toml"
    p.write_text('[[workloads]]\nsize = "1MB"\n[[conditions]]\nname = "t"\ntrace = "t.trace"\n')
    monkeypatch.chdir(tmp_path)
    plan = load_plan(p)
    assert plan.conditions[0].hops[0].down.trace == (tmp_path / "plans" / "t.trace").resolve()


def test_binary_and_oversized_plan_files_are_clear_errors(tmp_path):
    b = tmp_path / "b.toml"
    b.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(QuicbenchError, match="not a TOML plan"):
        load_plan(b)
    with pytest.raises(QuicbenchError, match="not found"):
        load_plan(tmp_path)


def test_resumption_is_an_object_workload_option_in_its_label():
    from quicbench.model.plan import Workload
    assert Workload(size="10KB").label == "1x10KB/p1"
    assert Workload(size="10KB", resumption="0rtt").label == "1x10KB/p1/0rtt"
    assert Workload(size="10KB", connections="per-object", resumption="tickets").label == "1x10KB/p1/per-object/tickets"
    with pytest.raises(ValueError, match="resumption: a page load starts a fresh browser"):
        Workload(kind="page", size="10KB", resumption="tickets")


def test_a_client_that_cannot_resume_is_refused():
    from quicbench.errors import QuicbenchError
    from quicbench.model.plan import plan_from_dict
    from quicbench.run.preflight import check_plan
    p = plan_from_dict({"client": "mine", "client_commands": {"mine": {"command": "true {urls}"}},
                        "workloads": [{"size": "10KB", "resumption": "0rtt"}]})
    with pytest.raises(QuicbenchError, match="resumption = '0rtt' cannot be honoured by client mine; accepted: none"):
        check_plan(p)


def test_interleaved_order_runs_each_repetition_over_every_condition():
    """order = "interleaved": the same trials, repetition 1 of every condition before repetition 2,
    each trial with its own condition (not the last one's), reproducible from the seed."""
    from quicbench.model.plan import expand, plan_from_dict
    body = {"name": "i", "protocols": ["h1", "h3"], "repetitions": 3, "warmup": 1,
            "workloads": [{"size": "1MB"}, {"size": "10KB", "count": 3}],
            "conditions": [{"name": "a", "delay_ms": 5}, {"name": "b", "delay_ms": 10, "reorder": True,
                                                          "jitter_ms": 1}, {"name": "c", "loss_pct": 1}]}
    seq, inter = plan_from_dict(body), plan_from_dict({**body, "order": "interleaved"})
    a, b = expand(seq), expand(inter)
    assert sorted(t.key for t in a) == sorted(t.key for t in b) and [t.seq for t in b] == list(range(len(b)))
    measured = [t for t in b if not t.warmup]
    assert [t.rep for t in measured] == sorted(t.rep for t in measured)
    assert all(t.key.startswith(f"{t.condition.name}|") for t in b)
    assert {t.condition.name: t.condition.base_rtt_ms for t in b} == {"a": 10, "b": 20, "c": 0}
    # a condition's warm-up comes before its first measured trial
    for c in "abc":
        first = min(i for i, t in enumerate(b) if t.condition.name == c)
        assert b[first].warmup
    assert [t.key for t in expand(inter)] == [t.key for t in b]


def test_link_seed_needs_linkem_and_is_one_per_repetition_of_every_protocol():
    base = {"workloads": [{"size": "10KB"}], "conditions": [{"name": "a", "loss_pct": 1}, {"name": "b"}],
            "repetitions": 2}
    with pytest.raises(QuicbenchError, match='link_seed: accepted with link = "linkem"'):
        plan_from_dict({**base, "link_seed": True})
    plan = plan_from_dict({**base, "link_seed": True, "link": "linkem"})
    seeds: dict[tuple[str, int], set[int]] = {}
    for spec in expand(plan):
        seeds.setdefault((spec.condition.name, spec.rep), set()).add(spec.link_seed(plan.seed))
    assert all(len(s) == 1 for s in seeds.values())                 # h1, h2, h3 of a repetition alike
    assert len({next(iter(s)) for s in seeds.values()}) == 4        # repetitions and conditions differ
    first = expand(plan)[0]
    assert first.link_seed(2) != first.link_seed(1)                 # the plan's seed is in it


def test_tcp_initcwnd_is_a_window_of_1_to_1000_segments(tmp_path):
    base = {"workloads": [{"size": "10KB"}]}
    assert plan_from_dict(base).tcp_initcwnd is None                 # the kernel's default
    assert plan_from_dict({**base, "tcp_initcwnd": 27}).tcp_initcwnd == 27
    for bad in (0, 1001, "ten"):
        with pytest.raises(QuicbenchError, match="tcp_initcwnd") as e:
            plan_from_dict({**base, "tcp_initcwnd": bad})
        assert "\n" not in str(e.value)
