"""Generated bad plans and flags: every one is exit 2, one line naming the field, no traceback,
nothing left behind (no run directory, no lab)."""

import random
import sys

import pytest

from quicbench.cli.main import main

GOOD = {
    "name": "fuzz", "protocols": ["h1", "h2"], "repetitions": 2, "link": "auto", "tcp_cc": "cubic",
    "workloads": [{"size": "10KB", "count": 2, "parallel": 2}],
    "conditions": [{"name": "c", "delay_ms": 5, "loss_pct": 1}],
}

# (path in the plan, bad value, text the error must contain)
TOP = [
    ("protocols", ["h4"], "protocols"), ("protocols", [], "protocols"), ("protocols", "h1", "protocols"),
    ("protocols", ["h1", "h1"], "protocols"), ("repetitions", 0, "repetitions"), ("repetitions", -3, "repetitions"),
    ("repetitions", "many", "repetitions"), ("repetitions", 1.5, "repetitions"), ("repetitions", 10**6, "repetitions"),
    ("seed", "x", "seed"), ("order", "chaos", "order"), ("trial_timeout_s", 0, "trial_timeout_s"),
    ("trial_timeout_s", -1, "trial_timeout_s"), ("warmup", 11, "warmup"), ("warmup", -1, "warmup"),
    ("link", "wormhole", "link"), ("link", 3, "link"), ("hops", 3, "hops"), ("hops", 0, "hops"),
    ("tcp_cc", "warp", "tcp_cc"), ("offload", "yes please", "offload"), ("calibrate", [1], "calibrate"),
    ("capture", {"a": 1}, "capture"), ("capture_keep", "forever", "capture_keep"), ("qlog", "x", "qlog"),
    ("keylog", 7.5, "keylog"), ("colour", "red", "colour"), ("servers", {"h3": "nginx"}, "servers.h3"),
    ("servers", {"h1": "iis"}, "servers.h1"), ("servers", {"h9": "caddy"}, "servers"),
    ("client", "curl", "client"), ("workloads", [], "workloads"), ("conditions", [], "conditions"),
    ("name", ["x"], "name"), ("description", 5, "description"),
]
WORKLOAD = [
    ("size", "1XB", "size"), ("size", "-5KB", "size"), ("size", "0B", "size"), ("size", "", "size"),
    ("count", 0, "count"), ("count", -1, "count"), ("count", 10**7, "count"), ("count", "three", "count"),
    ("parallel", 0, "parallel"), ("parallel", "some", "parallel"), ("parallel", 2.5, "parallel"),
    ("kind", "video-ish", "kind"), ("page", "huge", "page"), ("connections", "pool:0", "connections"),
    ("connections", "pool:x", "connections"), ("connections", "pool:", "connections"),
    ("connections", "lots", "connections"), ("connections", 5, "connections"), ("speed", 1, "speed"),
]
CONDITION = [
    ("name", "", "name"), ("name", "a|b", "name"), ("name", "tab\tbed", "name"), ("delay_ms", -1, "delay_ms"),
    ("delay_ms", "slow", "delay_ms"), ("delay_ms", 10**9, "delay_ms"), ("loss_pct", 101, "loss_pct"),
    ("loss_pct", -0.1, "loss_pct"), ("jitter_ms", -2, "jitter_ms"), ("jitter_dist", "cauchy", "jitter_dist"),
    ("rate_mbit", 0, "rate_mbit"), ("rate_mbit", -5, "rate_mbit"), ("rate_overhead_bytes", 14, "rate_overhead_bytes"),
    ("queue", {"packets": 0}, "queue"), ("queue", {"packets": 5, "ms": 3}, "queue"), ("spikes", {"period_ms": 100}, "spikes"),
    ("trace", "/nonexistent.trace", "trace"), ("trace", "/etc/hostname", "trace"), ("duplicate_pct", 200, "duplicate_pct"),
    ("corrupt_pct", -1, "corrupt_pct"), ("reorder", "sometimes", "reorder"), ("wobble", 1, "wobble"),
    ("loss", {"model": "bursty"}, "loss"), ("hops", [{}, {}, {}], "hops"), ("up", {"colour": 1}, "colour"),
]
FLAGS = [
    (["--reps", "0"], "--reps"), (["--reps", "x"], "--reps"), (["--only", "colour=red"], "--only colour"),
    (["--only", "protocol=h9"], "protocol=h9"), (["--only", "nonsense"], "--only 'nonsense'"),
    (["--resume", "/nonexistent/run"], "/nonexistent/run"), (["--retry-failed"], "--retry-failed"),
    (["--frobnicate"], "--frobnicate"), (["--only", "size=7MB"], "size=7MB"),
    (["--only", "condition=zzz"], "condition=zzz"),
]


def cases():
    out = []
    for key, val, needle in TOP:
        out.append(({**GOOD, key: val}, needle))
    for key, val, needle in WORKLOAD:
        out.append(({**GOOD, "workloads": [{**GOOD["workloads"][0], key: val}]}, needle))
    for key, val, needle in CONDITION:
        cond = {**GOOD["conditions"][0], key: val}
        if key == "rate_overhead_bytes":
            cond.pop("rate_mbit", None)
        out.append(({**GOOD, "conditions": [cond]}, needle))
    rng = random.Random(7)      # pairs of faults: the error still names one of the fields
    pool = [(k, v, n) for k, v, n in WORKLOAD]
    for _ in range(20):
        (k1, v1, n1), (k2, v2, n2) = rng.sample(pool, 2)
        if k1 == k2:
            continue
        out.append(({**GOOD, "workloads": [{**GOOD["workloads"][0], k1: v1, k2: v2}]}, (n1, n2)))
    return out


def to_toml(d) -> str:
    import json

    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {val(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return json.dumps(v)
    lines = [f"{k} = {val(v)}" for k, v in d.items() if k not in ("workloads", "conditions")]
    for table in ("workloads", "conditions"):
        items = d.get(table, [])
        if not items:
            lines.append(f"{table} = []")
        for item in items:
            lines.append(f"[[{table}]]")
            lines += [f"{k} = {val(v)}" for k, v in item.items()]
    return "\n".join(lines) + "\n"


class ReachedTheLab(Exception):
    """Raised instead of going on to create a lab: the input was accepted."""


@pytest.fixture(autouse=True)
def no_lab(monkeypatch):
    """A case that passes every check must not start a run here: it fails the test instead."""
    import quicbench.cli.run as cli_run

    def refuse():
        raise ReachedTheLab("the bad input was accepted")
    monkeypatch.setattr(cli_run, "require_root", refuse)


def run_cli(args, capfd):
    old = sys.argv
    sys.argv = ["quicbench", *args]
    try:
        with pytest.raises(SystemExit) as e:
            main()
    finally:
        sys.argv = old
    out = capfd.readouterr()
    return e.value.code, out.out, out.err


ALL = cases()


def test_enough_cases():
    assert len(ALL) + len(FLAGS) >= 100


@pytest.mark.parametrize("plan,needle", ALL, ids=[f"plan{i}" for i in range(len(ALL))])
def test_bad_plan(tmp_path, capfd, plan, needle):
    p = tmp_path / "bad.toml"
    p.write_text(to_toml(plan))
    out = tmp_path / "runs"
    code, stdout, stderr = run_cli(["run", str(p), "--out", str(out), "--no-report"], capfd)
    assert code == 2, (stdout, stderr)
    needles = needle if isinstance(needle, tuple) else (needle,)
    assert any(n in stderr for n in needles), stderr
    assert "Traceback" not in stderr + stdout
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert not out.exists()


@pytest.mark.parametrize("flags,needle", FLAGS, ids=[" ".join(f) for f, _ in FLAGS])
def test_bad_flags(tmp_path, capfd, flags, needle):
    p = tmp_path / "good.toml"
    p.write_text(to_toml(GOOD))
    out = tmp_path / "runs"
    code, stdout, stderr = run_cli(["run", str(p), "--out", str(out), "--no-report", *flags], capfd)
    assert code == 2, (stdout, stderr)
    assert needle in stderr + stdout, stderr + stdout
    assert "Traceback" not in stderr + stdout
    assert not out.exists()
