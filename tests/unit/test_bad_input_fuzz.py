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
    ("statistics", {"alpha": 0}, "statistics.alpha"), ("statistics", {"alpha": 0.5}, "statistics.alpha"),
    ("statistics", {"alpha": -1}, "statistics.alpha"), ("statistics", {"margin_pct": 0}, "statistics.margin_pct"),
    ("statistics", {"margin_pct": 100}, "statistics.margin_pct"), ("statistics", {"correction": "bonferroni"},
                                                                    "statistics.correction"),
    ("statistics", {"test": "ttest"}, "statistics.test"), ("statistics", {"colour": 1}, "unknown key 'colour'"),
]
WORKLOAD = [
    ("size", "1XB", "size"), ("size", "-5KB", "size"), ("size", "0B", "size"), ("size", "", "size"),
    ("count", 0, "count"), ("count", -1, "count"), ("count", 10**7, "count"), ("count", "three", "count"),
    ("parallel", 0, "parallel"), ("parallel", "some", "parallel"), ("parallel", 2.5, "parallel"),
    ("kind", "video-ish", "kind"), ("page", "huge", "page"), ("connections", "pool:0", "connections"),
    ("connections", "pool:x", "connections"), ("connections", "pool:", "connections"),
    ("connections", "lots", "connections"), ("connections", 5, "connections"), ("speed", 1, "speed"),
    ("resumption", "sometimes", "resumption"), ("resumption", True, "resumption"), ("resumption", "0-rtt", "resumption"),
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
    ("background", [{"protocol": "udp"}], "background"), ("background", [{"protocol": "tcp", "flows": 0}], "flows"),
    ("background", [{"protocol": "tcp", "flows": 9}], "flows"), ("background", [{"protocol": "h3", "cc": "bbr"}], "cc"),
    ("background", [{"protocol": "tcp", "cc": "warp"}], "cc 'warp'"), ("background", [{"flows": 2}], "protocol"),
    ("background", [{"protocol": "tcp", "flows": 5}, {"protocol": "h3", "flows": 4}], "at most 8"),
    ("background", {"protocol": "tcp"}, "background"), ("background", [{"protocol": "tcp", "colour": 1}], "colour"),
    ("latency_probe", "sometimes", "latency_probe"),
]
FLAGS = [
    (["--reps", "0"], "--reps"), (["--reps", "x"], "--reps"), (["--only", "colour=red"], "--only colour"),
    (["--only", "protocol=h9"], "protocol=h9"), (["--only", "nonsense"], "--only 'nonsense'"),
    (["--resume", "/nonexistent/run"], "/nonexistent/run"), (["--retry-failed"], "--retry-failed"),
    (["--frobnicate"], "--frobnicate"), (["--only", "size=7MB"], "size=7MB"),
    (["--only", "condition=zzz"], "condition=zzz"),
    (["--shard", "\u00b2/3"], "--shard"), (["--shard", "1/\u00b3"], "--shard"), (["--shard", "0/3"], "--shard"),
    (["--shard", "4/3"], "--shard"), (["--shard", "1/0"], "--shard"), (["--shard", "1/10001"], "--shard"),
    (["--shard", "x"], "--shard"), (["--shard", "1/3/4"], "--shard"), (["--shard", "\u0661/3"], "--shard"),
    (["--shard", "auto/3"], "--shard"), (["--shard", "-1/3"], "--shard"), (["--shard", "/"], "--shard"),
    (["--kernel", "vms"], "vms"), (["--kernel", "uml", "--backend", "ssh"], "--kernel"),
    (["--backend", "k8s"], "--backend"), (["--backend", "ssh"], "--inventory"),
    (["--inventory", "/etc/hostname"], "--inventory"), (["--jobs", "0"], "--jobs"), (["--jobs", "99"], "--jobs"),
    (["--provision"], "--provision"),
]
# the report's flags (the statistics' overrides)
REPORT_FLAGS = [
    (["--alpha", "0"], "--alpha"), (["--alpha", "0.7"], "--alpha"), (["--margin", "0"], "--margin"),
    (["--margin", "150"], "--margin"), (["--correction", "bonferroni"], "--correction"), (["--test", "z"], "--test"),
]
# the environment of an array job that --shard auto/N reads
SHARD_ENV = [
    ({"SLURM_ARRAY_TASK_ID": "\u00b2"}, "SLURM_ARRAY_TASK_ID"), ({"SLURM_ARRAY_TASK_ID": "x"}, "SLURM_ARRAY_TASK_ID"),
    ({"SLURM_ARRAY_TASK_ID": "9"}, "--shard"), ({"SLURM_ARRAY_TASK_ID": "0"}, "--shard"),
    ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "\u00b9"}, "SLURM_ARRAY_TASK_ID"),
    ({"JOB_COMPLETION_INDEX": "\u0661"}, "JOB_COMPLETION_INDEX"), ({"JOB_COMPLETION_INDEX": "3"}, "--shard"),
]
GOOD_INVENTORY = {
    "client": {"host": "127.0.0.1", "iface": "eth1", "address": "198.18.0.1/24"},
    "router": {"host": "127.0.0.1", "if_client": "eth1", "if_server": "eth2", "ip_client": "198.18.0.2/24",
               "ip_server": "198.18.1.1/24"},
    "server": {"host": "127.0.0.1", "iface": "eth1", "address": "198.18.1.2/24"},
}
# (table, key, bad value, text the error must contain)
INVENTORY_BAD = [
    ("ssh", "port", "22", "port"), ("ssh", "port", 0, "port"), ("ssh", "port", 70000, "port"),
    ("client", "port", "22", "port"), ("client", "host", "", "host"), ("server", "host", "a b", "host"),
    ("router", "host", "root@10.0.0.1", "host"), ("client", "iface", "", "iface"),
    ("client", "iface", "a-very-long-interface-name", "iface"), ("client", "address", "198.18.0.1", "address"),
    ("client", "address", "not-an-ip/24", "address"), ("router", "ip_server", "1.2.3.4/99", "ip_server"),
    ("ssh", "workdir", "relative", "workdir"), ("ssh", "workdir", "/tmp", "workdir"),
    ("server", "bin_dir", "bin", "bin_dir"), ("ssh", "deadman_s", 1, "deadman_s"), ("ssh", "colour", "red", "colour"),
    ("client", "colour", "red", "colour"), ("ssh", "known_hosts", "/nonexistent/known_hosts", "known_hosts"),
]

VIDEO = {"kind": "video", "player": "hls", "mode": "vod", "duration_s": 8, "segment_s": 4}
VIDEO_BAD = [
    ("player", "vlc", "player"), ("mode", "dvr", "mode"), ("duration_s", 0, "duration_s"),
    ("duration_s", 10**5, "duration_s"), ("segment_s", 0, "segment_s"), ("segment_s", 50, "segment_s"),
    ("codec", "mpeg2", "codec"), ("ladder", [], "ladder"), ("ladder", [[100, 500]], "ladder"),
    ("ladder", [[720, 10]], "ladder"), ("ladder", [[720, 3000], [360, 800]], "ladder"),
    ("ladder", [[721, 3000]], "ladder"), ("ladder", [[720]], "ladder"), ("ladder", "720p", "ladder"),
    ("connections", "per-object", "connections"), ("connections", "pool:2", "connections"),
    ("resumption", "0rtt", "resumption"), ("resumption", "tickets", "resumption"),
]
CONNECTIONS_BAD = [
    ("connections", "pool:99999999999999999999", "connections"), ("connections", "pool:1001", "connections"),
    ("connections", "pool:\u00b2", "connections"), ("connections", "pool:-1", "connections"),
    ("connections", "pool: 3", "connections"), ("connections", "POOL:3", "connections"),
    ("connections", "per_object", "connections"), ("connections", "", "connections"),
]
# a command endpoint's definition: (table, definition, text the error must contain)
COMMANDS_BAD = [
    ("client_commands", {"command": "curl {ca!z}"}, "ca!z"), ("client_commands", {"command": "curl {ca!r}"}, "ca!r"),
    ("client_commands", {"command": "curl {count:>99999999999999999999}"}, "format spec"),
    ("client_commands", {"command": "curl {count:5}"}, "format spec"),
    ("client_commands", {"command": "curl\u0000 {url}"}, "U+0000"),
    ("client_commands", {"command": "curl \u001b[31m{url}"}, "U+001B"),
    ("client_commands", {"command": "curl {nope}"}, "{nope}"), ("client_commands", {"command": "curl {ca.x}"}, "ca.x"),
    ("client_commands", {"command": "curl {ca[0]}"}, "ca[0]"), ("client_commands", {"command": ""}, "empty"),
    ("client_commands", {"command": "   "}, "empty"), ("client_commands", {"command": "curl 'x"}, "shell-like"),
    ("client_commands", {"command": "curl {"}, "brace"), ("client_commands", {"command": "curl x{urls}"}, "urls"),
    ("client_commands", {"command": "{url} x"}, "program"), ("client_commands", {"command": "c", "protocols": []}, "protocols"),
    ("client_commands", {"command": "c", "protocols": ["h4"]}, "protocols"),
    ("client_commands", {"command": "c", "version": "v {url}"}, "version"),
    ("client_commands", {"command": "c", "colour": "red"}, "colour"),
    ("server_commands", {"command": "srv {root!s}"}, "root!s"), ("server_commands", {"command": "srv {port:d}"}, "format spec"),
    ("server_commands", {"command": "srv\u0000"}, "U+0000"), ("server_commands", {"command": "srv {url}"}, "{url}"),
    ("server_commands", {"command": "srv", "ready": "chk {count}"}, "ready"),
    ("server_commands", {"command": "srv", "ready_timeout_s": 0}, "ready_timeout_s"),
    ("server_commands", {"command": "srv", "ready_timeout_s": 10**4}, "ready_timeout_s"),
    ("server_commands", {"command": "srv", "protocols": ["h9"]}, "protocols"),
    ("server_commands", {"command": "srv", "listen": 1}, "listen"),
]
# a command endpoint named like a built-in driver would replace it while rows still name the built-in
SHADOWING = [("client_commands", "qb-load"), ("client_commands", "browser"), ("client_commands", "video"),
             ("server_commands", "caddy"), ("server_commands", "nginx"), ("server_commands", "apache")]


H3 = {"protocols": ["h3"], "servers": {"h3": "ngtcp2"}}
# congestion control (plan keys tcp_cc, quic_cc) and the ngtcp2 client: (plan changes, needle)
CC_BAD = [
    ({"tcp_cc": []}, "tcp_cc"), ({"tcp_cc": ["cubic", "cubic"]}, "tcp_cc"), ({"tcp_cc": ["cubic", "warp"]}, "tcp_cc"),
    ({"tcp_cc": ["Cubic"]}, "tcp_cc"), ({"tcp_cc": 5}, "tcp_cc"), ({"tcp_cc": "a b"}, "tcp_cc"),
    ({"tcp_cc": {"h2": "bbr"}}, "tcp_cc"), ({**H3, "tcp_cc": ["cubic", "bbr"]}, "tcp_cc"),
    ({"quic_cc": "bbr"}, "quic_cc"), ({"protocols": ["h3"], "quic_cc": "bbr"}, "quic_cc"),
    ({**H3, "quic_cc": "vegas"}, "quic_cc"), ({**H3, "quic_cc": {"caddy": "bbr"}}, "quic_cc.caddy"),
    ({**H3, "quic_cc": {}}, "quic_cc"), ({**H3, "quic_cc": ["bbr", "bbr"]}, "quic_cc"),
    ({**H3, "quic_cc": {"ngtcp2": []}}, "quic_cc"), ({**H3, "quic_cc": 3}, "quic_cc"),
    ({**H3, "quic_cc": ["BBR"]}, "quic_cc"), ({**H3, "quic_cc": {"ngtcp2": "vegas"}}, "quic_cc.ngtcp2"),
    ({"protocols": ["h3"], "servers": {"h3": ["caddy", "ngtcp2"]}, "quic_cc": ["cubic"]}, "quic_cc"),
    ({**H3, "client": "ngtcp2", "workloads": [{"size": "10KB", "count": 3, "parallel": 2}]}, "parallel"), ({"protocols": ["h1", "h3"], "client": "ngtcp2"}, "client"),
    ({**H3, "client": "ngtcp2", "workloads": [{"size": "10KB", "count": 2, "resumption": "tickets"}]}, "resumption"),
    ({**H3, "client": "ngtcp2", "workloads": [{"size": "10KB", "count": 2, "connections": "pool:2"}]}, "connections"),
    ({**H3, "client": "ngtcp2", "workloads": [{"size": "10KB", "count": 6000}]}, "count"),
    ({**H3, "client": "ngtcp2", "workloads": [{"size": "10KB", "count": 200, "parallel": 100,
                                                 "connections": "per-object"}]}, "parallel"),
    ({"protocols": ["h1"], "servers": {"h1": "ngtcp2"}}, "servers.h1"),
]


def cases():
    out = []
    for changes, needle in CC_BAD:
        out.append(({**GOOD, **changes}, needle))
    for key, val, needle in TOP:
        out.append(({**GOOD, key: val}, needle))
    for key, val, needle in WORKLOAD:
        out.append(({**GOOD, "workloads": [{**GOOD["workloads"][0], key: val}]}, needle))
    for key, val, needle in CONDITION:
        cond = {**GOOD["conditions"][0], key: val}
        if key == "rate_overhead_bytes":
            cond.pop("rate_mbit", None)
        out.append(({**GOOD, "conditions": [cond]}, needle))
    for key, val, needle in VIDEO_BAD:
        out.append(({**GOOD, "workloads": [{**VIDEO, key: val}]}, needle))
    for key, val, needle in CONNECTIONS_BAD:
        out.append(({**GOOD, "workloads": [{**GOOD["workloads"][0], key: val}]}, needle))
    for table, definition, needle in COMMANDS_BAD:
        out.append(({**GOOD, table: {"mine": definition}}, needle))
    for table, name in SHADOWING:
        out.append(({**GOOD, table: {name: {"command": "true"}}}, f"{table}.{name}"))
    rng = random.Random(7)      # pairs of faults: the error still names one of the fields
    pool = [(k, v, n) for k, v, n in WORKLOAD]
    for _ in range(20):
        (k1, v1, n1), (k2, v2, n2) = rng.sample(pool, 2)
        if k1 == k2:
            continue
        out.append(({**GOOD, "workloads": [{**GOOD["workloads"][0], k1: v1, k2: v2}]}, (n1, n2)))
    return out


def toml_value(v) -> str:
    import json
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return json.dumps(v)


def to_toml(d) -> str:
    val = toml_value
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
    assert len(ALL) + len(FLAGS) + len(SHARD_ENV) + len(INVENTORY_BAD) >= 150


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


@pytest.mark.parametrize("env,needle", SHARD_ENV, ids=[repr(e) for e, _ in SHARD_ENV])
def test_bad_array_job_environment(tmp_path, capfd, monkeypatch, env, needle):
    for k in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "JOB_COMPLETION_INDEX"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    p = tmp_path / "good.toml"
    p.write_text(to_toml(GOOD))
    out = tmp_path / "runs"
    code, stdout, stderr = run_cli(["run", str(p), "--out", str(out), "--no-report", "--shard", "auto/3"], capfd)
    assert code == 2, (stdout, stderr)
    assert needle in stderr, stderr
    assert "Traceback" not in stderr + stdout
    assert not out.exists()


@pytest.mark.parametrize("table,key,val,needle", INVENTORY_BAD, ids=[f"{t}.{k}={v!r}" for t, k, v, _ in INVENTORY_BAD])
def test_bad_inventory(tmp_path, capfd, table, key, val, needle):
    inv = {t: dict(v) for t, v in GOOD_INVENTORY.items()}
    inv.setdefault(table, {})[key] = val
    (tmp_path / "hosts.toml").write_text("\n".join(
        f"[{t}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in items.items())
        for t, items in inv.items()))
    p = tmp_path / "good.toml"
    p.write_text(to_toml(GOOD))
    out = tmp_path / "runs"
    code, stdout, stderr = run_cli(["run", str(p), "--out", str(out), "--no-report", "--backend", "ssh",
                                    "--inventory", str(tmp_path / "hosts.toml")], capfd)
    assert code == 2, (stdout, stderr)
    assert f"{table}.{key}" in stderr or (table == "ssh" and key in stderr), stderr
    assert needle in stderr, stderr
    assert "Traceback" not in stderr + stdout
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert not out.exists()


@pytest.mark.parametrize("flags,needle", REPORT_FLAGS, ids=[" ".join(f) for f, _ in REPORT_FLAGS])
def test_bad_report_flags(tmp_path, capfd, flags, needle):
    from conftest import REPO
    import shutil
    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "fixtures" / "goquick-small", run)
    code, stdout, stderr = run_cli(["report", str(run), "--format", "md", *flags], capfd)
    assert code == 2, (stdout, stderr)
    assert needle in stderr and "accepted" in stderr, stderr
    assert not (run / "summary.csv").exists() and not (run / "report.md").exists()
