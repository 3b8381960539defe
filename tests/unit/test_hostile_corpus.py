"""issue 45 part 8: the hostile corpus. Every case is an input that must be refused: exit 2, one line on
stderr naming the field (or file), no traceback, nothing left behind (no run directory, no lab, no
file beside the inputs). The CLI runs in this process (its entry point, SystemExit caught), so the
corpus of some 350 cases takes seconds. Groups follow the issue's parts:

  content  (1) what a server would serve: links, hard links, special files in --content
  rundir   (2, 6) readers of a run directory: links out, malformed meta.json / trials / gzip
  names    (3) names that generated scripts take: plan names, Slurm and Kubernetes flags
  decided  (4) --until-decided and --reps bounds
  mixing   (5) a resume or merge that would mix plans, selections, links, kernels, backends;
               duplicate drivers in a sweep
  strict   (6) types, bounds, sizes, digits, printable names, nesting, inventories
  leftover (7) results publish onto a file, on a torn line, while the run is being written
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import sys
from pathlib import Path

import pytest

from quicbench.cli.main import main
from quicbench.model.shard import Shard
from test_bad_input_fuzz import GOOD, GOOD_INVENTORY, to_toml, toml_value
from test_merge import plan as merge_plan, write_shard


class ReachedTheLab(Exception):
    """Raised instead of going on to create a lab: the input was accepted."""


@pytest.fixture(autouse=True)
def no_lab(monkeypatch, tmp_path):
    """An accepted case must not start anything here: it fails instead. The caches are the test's."""
    import quicbench.cli.lab as cli_lab
    import quicbench.cli.run as cli_run

    def refuse(*a, **k):
        raise ReachedTheLab("the bad input was accepted")
    monkeypatch.setattr(cli_run, "require_root", refuse)
    monkeypatch.setattr(cli_lab, "reap", refuse)
    monkeypatch.setenv("QUICBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("QUICBENCH_STATE", str(tmp_path / "state"))


def run_cli(args: list[str], capfd) -> tuple[int, str, str]:
    old = sys.argv
    sys.argv = ["quicbench", *map(str, args)]
    try:
        with pytest.raises(SystemExit) as e:
            main()
    finally:
        sys.argv = old
    out = capfd.readouterr()
    return e.value.code, out.out, out.err


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


def refused(capfd, tmp_path: Path, args: list, needle: str | tuple[str, ...]) -> None:
    """The one assertion of the corpus."""
    before = tree(tmp_path)
    code, out, err = run_cli(args, capfd)
    assert "Traceback" not in out + err, err
    assert code == 2, (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    needles = needle if isinstance(needle, tuple) else (needle,)
    assert any(n in err for n in needles), (needles, err)
    left = {p for p in tree(tmp_path) - before if not p.startswith(("cache", "state"))}
    assert not left, f"left behind: {sorted(left)}"


# -- content (part 1): lab up --serve SERVER --content DIR ------------------------------------------
def _secret(tmp_path: Path) -> Path:
    s = tmp_path / "outside" / "secret.txt"
    s.parent.mkdir(exist_ok=True)
    s.write_text("not for the lab\n")
    return s


def _unix_socket(p: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()


CONTENT_HAZARDS = {
    "symlink-shadow": (lambda site, secret: (site / "s").symlink_to("/etc/shadow"), "s is a link to /etc/shadow"),
    "symlink-etc": (lambda site, secret: (site / "d" / "e").symlink_to("/etc"), "d/e is a link to /etc"),
    "symlink-outside": (lambda site, secret: (site / "x").symlink_to(secret), "x is a link to"),
    "symlink-relative": (lambda site, secret: (site / "r").symlink_to("../outside/secret.txt"), "r is a link to"),
    "symlink-dir-inside": (lambda site, secret: (site / "loop").symlink_to(site / "d"), "not a regular file"),
    "symlink-dangling": (lambda site, secret: (site / "dg").symlink_to(site / "nowhere"), "dg is a link to"),
    "hardlink-outside": (lambda site, secret: os.link(secret, site / "h"), "h has 2 names"),
    "hardlink-deep": (lambda site, secret: os.link(secret, site / "d" / "h2"), "d/h2 has 2 names"),
    "fifo": (lambda site, secret: os.mkfifo(site / "f"), "f is not a regular file or directory"),
    "socket": (lambda site, secret: _unix_socket(site / "sock"), "sock is not a regular file or directory"),
}
SERVE = ["caddy", "nginx", "apache", "apache-prefork", "caddy-2.6"]


def _available(server: str) -> bool:
    from quicbench.servers import SERVERS
    return SERVERS.get(server).available()[0]


CONTENT_CASES = [(s, h) for s in SERVE for h in CONTENT_HAZARDS]


@pytest.mark.skipif(os.geteuid() != 0, reason="lab up checks root first")
@pytest.mark.parametrize("server,hazard", CONTENT_CASES, ids=[f"content-{s}-{h}" for s, h in CONTENT_CASES])
def test_content(tmp_path, capfd, server, hazard):
    if not _available(server):
        pytest.skip(f"{server} not installed")
    site = tmp_path / "site"
    (site / "d").mkdir(parents=True)
    (site / "a.txt").write_text("served\n")
    make, needle = CONTENT_HAZARDS[hazard]
    make(site, _secret(tmp_path))
    refused(capfd, tmp_path, ["lab", "up", "--name", "t-hostile", "--serve", server, "--content", site], needle)


# -- run directories (parts 2 and 6): links out and malformed files --------------------------------
def _runs(tmp_path: Path) -> tuple[Path, Path]:
    p = merge_plan()
    a = write_shard(tmp_path / "in", p, Shard(1, 2), host="n1")
    b = write_shard(tmp_path / "in", p, Shard(2, 2), host="n2")
    return a, b


def _deep(n: int = 100_000) -> str:
    return "[" * n + "]" * n


META_BAD = {       # meta.json's text -> what the error says
    "list": ("[]", "a JSON object is expected"), "string": ('"x"', "a JSON object is expected"),
    "number": ("1", "a JSON object is expected"), "null": ("null", "a JSON object is expected"),
    "torn": ('{"plan": ', "not valid JSON"), "binary": ("\udcff\udcfe", "not valid JSON"),
    "deep": (_deep(), "not valid JSON"), "empty": ("", "not valid JSON"),
}


def _set_meta(run: Path, text: str) -> None:
    (run / "meta.json").write_bytes(text.encode("utf-8", "surrogateescape"))


def _commands(a: Path, b: Path, tmp_path: Path) -> dict[str, list]:
    return {"report": ["report", a, "--format", "md"], "compare": ["compare", a, b],
            "merge": ["merge", a, b, "--out", tmp_path / "merged"],
            "publish": ["results", "publish", a, tmp_path / "pub"]}


READER_CASES = [(c, m) for c in ("report", "compare", "merge", "publish") for m in META_BAD]


@pytest.mark.parametrize("command,meta", READER_CASES, ids=[f"rundir-{c}-meta-{m}" for c, m in READER_CASES])
def test_reader_on_malformed_meta(tmp_path, capfd, command, meta):
    a, b = _runs(tmp_path)
    text, needle = META_BAD[meta]
    _set_meta(a, text)
    refused(capfd, tmp_path, _commands(a, b, tmp_path)[command], ("meta.json", needle))


LINK_OUT = ["meta.json", "trials.jsonl"]
LINK_CASES = [(c, f) for c in ("report", "compare", "merge", "publish") for f in LINK_OUT]


@pytest.mark.parametrize("command,name", LINK_CASES, ids=[f"rundir-{c}-link-{f}" for c, f in LINK_CASES])
def test_reader_on_a_file_linked_out(tmp_path, capfd, command, name):
    a, b = _runs(tmp_path)
    (tmp_path / "elsewhere").write_bytes((a / name).read_bytes())
    (a / name).unlink()
    (a / name).symlink_to(tmp_path / "elsewhere")
    refused(capfd, tmp_path, _commands(a, b, tmp_path)[command], "outside the run directory")


def _a_trial(run: Path) -> Path:
    row = next(r for r in map(json.loads, (run / "trials.jsonl").read_text().splitlines()) if not r["warmup"])
    return run / "trials" / f"{row['seq']:05d}"


TRIAL_HAZARDS = {
    "dir-to-etc": lambda t, s: (t.rename(t.with_name("aside")), t.symlink_to("/etc")),
    "file-to-secret": lambda t, s: (t / "shadow").symlink_to(s),
    "file-to-shadow": lambda t, s: (t / "shadow").symlink_to("/etc/shadow"),
    "hard-link": lambda t, s: os.link(s, t / "shadow"),
    "fifo": lambda t, s: os.mkfifo(t / "pipe"),
}


@pytest.mark.parametrize("hazard", TRIAL_HAZARDS, ids=[f"rundir-merge-trial-{h}" for h in TRIAL_HAZARDS])
def test_merge_refuses_a_trial_directory_that_leaves_the_run(tmp_path, capfd, hazard):
    a, b = _runs(tmp_path)
    TRIAL_HAZARDS[hazard](_a_trial(a), _secret(tmp_path))
    refused(capfd, tmp_path, ["merge", a, b, "--out", tmp_path / "merged"], ("outside the run directory",
                                                                               "hard link", "not a regular file"))


RESUME_META = {**META_BAD, "object": ("{}", "meta.json has no plan"),
               "plan-not-object": ('{"plan": 3}', "meta.json has no plan")}


@pytest.mark.parametrize("meta", RESUME_META, ids=[f"rundir-resume-meta-{m}" for m in RESUME_META])
def test_resume_on_malformed_meta(tmp_path, capfd, meta):
    run = tmp_path / "run"
    run.mkdir()
    text, needle = RESUME_META[meta]
    _set_meta(run, text)
    plan = tmp_path / "plan.toml"
    plan.write_text(to_toml(GOOD))
    refused(capfd, tmp_path, ["run", plan, "--resume", run, "--no-report"], ("meta.json", needle))


@pytest.mark.parametrize("data", ["not gzip at all", "\x1f\x8b\x08\x00truncated"],
                         ids=["rundir-check-gzip-garbage", "rundir-check-gzip-truncated"])
def test_results_check_on_a_corrupt_gzip(tmp_path, capfd, data):
    a, _ = _runs(tmp_path)
    d = tmp_path / "pub"
    d.mkdir()
    (d / "meta.json").write_bytes((a / "meta.json").read_bytes())
    (d / "trials.jsonl.gz").write_bytes(data.encode("latin-1"))
    page = tmp_path / "page.md"
    page.write_text('# p\n<!-- quicbench:table data=pub section="Summary" -->\nx\n<!-- /quicbench:table -->\n')
    refused(capfd, tmp_path, ["results", "check", page], "trials.jsonl.gz")


# -- names in generated scripts (part 3) -----------------------------------------------------------
PLAN_NAMES = ["x\ntouch /tmp/p #", "x\r\n#SBATCH --wrap=id", "ünïcode", "名前", "", " ", "-x", ".hidden", "a b",
              "a;b", "a'b", 'a"b', "a$(id)", "a`id`", "a/b", "a\x7f", "a\x00b", "x" * 65, "a\u200bb", "\u0661"]


@pytest.mark.parametrize("name", PLAN_NAMES, ids=[f"names-plan-{i}" for i in range(len(PLAN_NAMES))])
@pytest.mark.parametrize("command", ["run", "slurm", "k8s"])
def test_plan_name(tmp_path, capfd, name, command):
    plan = tmp_path / "plan.toml"
    plan.write_text(to_toml({**GOOD, "name": name}))
    args = {"run": ["run", plan, "--out", tmp_path / "runs"],
            "slurm": ["slurm", plan, "--shards", "2", "--out", tmp_path / "sl", "--setup", "none"],
            "k8s": ["k8s", plan, "--shards", "2", "--image", "img", "--out", tmp_path / "job.yaml"]}[command]
    refused(capfd, tmp_path, args, "name")


SCRIPT_FLAGS = [
    (["slurm", "--partition", "a b"], "--partition"), (["slurm", "--partition", "x;id"], "--partition"),
    (["slurm", "--partition", "-x"], "--partition"), (["slurm", "--time", "1h;id"], "--time"),
    (["slurm", "--time", "１:00"], "--time"), (["slurm", "--setup", "curl|sh"], "--setup"),
    (["slurm", "--out", "with space"], "--out"), (["slurm", "--out", "new\nline"], "--out"),
    (["k8s", "--image", "img name"], "--image"), (["k8s", "--image", "img\n"], "--image"),
    (["k8s", "--image", "$(id)"], "--image"), (["k8s", "--pvc", "a b"], "--pvc"),
    (["k8s", "--name", "Bad_Name"], "--name"), (["k8s", "--name", "x" * 60], "--name"),
    (["k8s", "--name", "-x"], "--name"), (["k8s", "--namespace", "a.b"], "--namespace"),
    (["k8s", "--namespace", "ünï"], "--namespace"),
]


@pytest.mark.parametrize("flags,needle", SCRIPT_FLAGS, ids=[f"names-{'-'.join(f)[:30]}" for f, _ in SCRIPT_FLAGS])
def test_script_flags(tmp_path, capfd, flags, needle):
    plan = tmp_path / "plan.toml"
    plan.write_text(to_toml(GOOD))
    cmd, rest = flags[0], flags[1:]
    base = {"slurm": ["slurm", plan, "--shards", "2", "--setup", "none"],
            "k8s": ["k8s", plan, "--shards", "2", "--image", "img"]}[cmd]
    if "--out" in rest:
        rest = ["--out", tmp_path / rest[1]]
    elif cmd == "slurm":
        base += ["--out", tmp_path / "sl"]
    refused(capfd, tmp_path, [*base, *rest], needle)


# -- --until-decided and --reps (part 4) -----------------------------------------------------------
DECIDED = [(["--until-decided", str(10**12)], "--until-decided"), (["--until-decided", "1001"], "--until-decided"),
           (["--until-decided", "0"], "--until-decided"), (["--until-decided", "-1"], "--until-decided"),
           (["--until-decided", "x"], "--until-decided"), (["--until-decided", "1e3"], "--until-decided"),
           (["--until-decided", "２"], "--until-decided"), (["--until-decided", "1"], "--until-decided"),
           (["--until-decided", "10", "--shard", "1/2"], "--until-decided"),
           (["--reps", str(10**12)], "--reps"), (["--reps", "1001"], "--reps"), (["--reps", "-1"], "--reps"),
           (["--reps", "1.5"], "--reps"), (["--reps", "١"], "--reps"), (["--reps", ""], "--reps"),
           (["--reps", "5", "--until-decided", "4"], "--until-decided")]


@pytest.mark.parametrize("flags,needle", DECIDED, ids=[f"decided-{' '.join(f)[:30]}" for f, _ in DECIDED])
def test_until_decided_and_reps(tmp_path, capfd, flags, needle):
    plan = tmp_path / "plan.toml"
    plan.write_text(to_toml(GOOD))
    refused(capfd, tmp_path, ["run", plan, "--out", tmp_path / "runs", *flags], needle)


REPS_ELSEWHERE = [["plan", "show", "{plan}", "--reps", str(10**12)],
                  ["slurm", "{plan}", "--shards", "2", "--reps", str(10**12), "--setup", "none", "--out", "{tmp}/sl"],
                  ["k8s", "{plan}", "--shards", "2", "--image", "img", "--reps", str(10**12)]]


@pytest.mark.parametrize("args", REPS_ELSEWHERE, ids=["decided-plan-show-reps", "decided-slurm-reps", "decided-k8s-reps"])
def test_reps_bounded_everywhere(tmp_path, capfd, args):
    plan = tmp_path / "plan.toml"
    plan.write_text(to_toml(GOOD))
    refused(capfd, tmp_path, [a.format(plan=plan, tmp=tmp_path) for a in args], "--reps")


# -- mixing (part 5) -------------------------------------------------------------------------------
def _run_of(tmp_path: Path, plan: dict, only: dict | None = None) -> Path:
    from quicbench.model.plan import plan_from_dict
    from quicbench.run.runner import plan_fingerprint
    p = plan_from_dict(plan)
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({
        "run_id": "run", "format_version": 2, "status": "interrupted", "plan": json.loads(p.model_dump_json()),
        "plan_fingerprint": plan_fingerprint(p), "reps": None, "only": only}))
    return run


RESUME_MIX = [
    ({"protocols": ["h1"]}, ["--only", "protocol=h2"], "--only"),
    ({"protocols": ["h1", "h2"]}, ["--only", "protocol=h2"], "--only"),
    ({}, ["--only", "condition=c"], "--only"),
]


@pytest.mark.parametrize("was,flags,needle", RESUME_MIX, ids=[f"mixing-resume-only-{i}" for i in range(len(RESUME_MIX))])
def test_resume_does_not_mix_selections(tmp_path, capfd, was, flags, needle):
    run = _run_of(tmp_path, {**GOOD, **was}, only={"protocol": ["h1"]} if was.get("protocols") == ["h1", "h2"] else None)
    plan = tmp_path / "plan.toml"
    plan.write_text(to_toml({**GOOD, **was}))
    refused(capfd, tmp_path, ["run", plan, "--resume", run, "--no-report", *flags], needle)


@pytest.mark.parametrize("other", [{"protocols": ["h1", "h2", "h3"]}, {"repetitions": 3}, {"seed": 9}],
                         ids=["mixing-resume-plan-protocols", "mixing-resume-plan-reps", "mixing-resume-plan-seed"])
def test_resume_does_not_mix_plans(tmp_path, capfd, other):
    run = _run_of(tmp_path, GOOD)
    plan = tmp_path / "plan.toml"
    plan.write_text(to_toml({**GOOD, **other}))
    refused(capfd, tmp_path, ["run", plan, "--resume", run, "--no-report"], ("--resume", "plan"))


MERGE_MIX = {
    "link": ("link", {"name": "netem"}), "kernel": ("host", {"hostname": "n2", "kernel_driver": "uml"}),
    "backend": ("lab", {"backend": "ssh"}), "version": ("quicbench_version", "9.9.9"),
    "reps": ("reps", 7), "fingerprint": ("plan_fingerprint", "0" * 16),
}


@pytest.mark.parametrize("what", MERGE_MIX, ids=[f"mixing-merge-{w}" for w in MERGE_MIX])
def test_merge_does_not_mix(tmp_path, capfd, what):
    a, b = _runs(tmp_path)
    meta = json.loads((b / "meta.json").read_text())
    key, value = MERGE_MIX[what]
    meta[key] = value
    (b / "meta.json").write_text(json.dumps(meta))
    refused(capfd, tmp_path, ["merge", a, b, "--out", tmp_path / "merged"], ("differ", str(a)))


SWEEPS = [({"servers": {"h1": ["caddy", "caddy"]}}, "servers.h1"), ({"servers": {"h2": ["nginx", "nginx"]}}, "servers.h2"),
          ({"servers": {"h1": []}}, "servers.h1"), ({"servers": {"h1": [""]}}, "servers.h1"),
          ({"protocols": ["h3"], "servers": {"h3": []}}, "servers.h3"),
          ({"client": ["qb-load", "qb-load"]}, "client"), ({"client": []}, "client"),
          ({"tcp_cc": ["cubic", "cubic"]}, "tcp_cc")]


@pytest.mark.parametrize("over,needle", SWEEPS, ids=[f"mixing-sweep-{i}" for i in range(len(SWEEPS))])
def test_duplicate_drivers_in_a_sweep(tmp_path, capfd, over, needle):
    plan = tmp_path / "plan.toml"
    plan.write_text(to_toml({**GOOD, **over}))
    refused(capfd, tmp_path, ["run", plan, "--out", tmp_path / "runs"], needle)


# -- strict inputs (part 6) ------------------------------------------------------------------------
BOOLS = ["link_seed", "offload", "calibrate", "capture", "capture_router", "verify_cc", "keylog"]
INTS = ["repetitions", "warmup", "seed", "tcp_initcwnd"]
TYPES = ([(k, v) for k in BOOLS for v in ("true", "yes", 1, 0, 1.0)]
         + [(k, v) for k in INTS for v in (True, 2.0, "3", 1e9)]
         + [("qlog", v) for v in ("true", 1, "x")] + [("hops", v) for v in (True, 2.0, "2")]
         + [("trial_timeout_s", v) for v in (float("inf"), float("-inf"), float("nan"), 1e308, 1e6, 86400.5, "60",
                                             True, 0, -1)]
         + [("repetitions", v) for v in (10**12, 1001, 0)] + [("seed", v) for v in (-1,)]
         + [("name", v) for v in (1, True, ["x"])])


def _toml_scalar(v) -> str:
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return toml_value(v)


def _plan_text(top: dict | None = None, workload: dict | None = None, condition: dict | None = None) -> str:
    lines = [f"{k} = {_toml_scalar(v)}" for k, v in {k: v for k, v in GOOD.items()
                                                     if k not in ("workloads", "conditions")}.items()
             if k not in (top or {})]
    lines += [f"{k} = {_toml_scalar(v)}" for k, v in (top or {}).items()]
    lines.append("[[workloads]]")
    lines += [f"{k} = {_toml_scalar(v)}" for k, v in {**GOOD["workloads"][0], **(workload or {})}.items()]
    lines.append("[[conditions]]")
    lines += [f"{k} = {_toml_scalar(v)}" for k, v in {**GOOD["conditions"][0], **(condition or {})}.items()]
    return "\n".join(lines) + "\n"


IGNORED = [({"capture_keep": "raw"}, "capture_keep"), ({"capture_router": True}, "capture_router"),
           ({"verify_cc": True}, "verify_cc"), ({"qlog": True}, "qlog")]       # GOOD: h1, h2, no capture


@pytest.mark.parametrize("top,needle", IGNORED, ids=[f"strict-ignored-{n}" for _, n in IGNORED])
def test_a_field_the_options_would_ignore(tmp_path, capfd, top, needle):
    plan = tmp_path / "plan.toml"
    plan.write_text(_plan_text(top=top))
    refused(capfd, tmp_path, ["run", plan, "--out", tmp_path / "runs"], needle)


@pytest.mark.parametrize("key,value", TYPES, ids=[f"strict-{k}={v!r}" for k, v in TYPES])
def test_strict_plan_fields(tmp_path, capfd, key, value):
    plan = tmp_path / "plan.toml"
    plan.write_text(_plan_text(top={key: value}))
    refused(capfd, tmp_path, ["run", plan, "--out", tmp_path / "runs"], key)


WORKLOAD_STRICT = ([("count", v) for v in (True, 2.0, "3", 1e9, 10**12)]
                   + [("parallel", v) for v in (1e9, 2.5, "3", True, 10**9, 0)]
                   + [("size", v) for v in ("500GB", "１０KB", "١٠KB", "10KB\n", "1e3KB", "10KBB", "0.0001B",
                                            "99999999999999999999GB", 10**12, True, 1.5, "10 K B", "٣MB",
                                            "10\u00a0KB", "+10KB", "-0KB")])


@pytest.mark.parametrize("key,value", WORKLOAD_STRICT, ids=[f"strict-workload-{k}={v!r}" for k, v in WORKLOAD_STRICT])
def test_strict_workload_fields(tmp_path, capfd, key, value):
    plan = tmp_path / "plan.toml"
    plan.write_text(_plan_text(workload={key: value}))
    refused(capfd, tmp_path, ["run", plan, "--out", tmp_path / "runs"], key)


COND_NAMES = ["a\x7fb", "a\x80b", "a\u200bb", "a\x1b[31m", "a\nb", "a|b", "", " ", "\u2028", "a\x00b", "\ufeff"]


@pytest.mark.parametrize("name", COND_NAMES, ids=[f"strict-condition-name-{i}" for i in range(len(COND_NAMES))])
def test_condition_names_printable(tmp_path, capfd, name):
    plan = tmp_path / "plan.toml"
    plan.write_text(_plan_text(condition={"name": name}))
    refused(capfd, tmp_path, ["run", plan, "--out", tmp_path / "runs"], "name")


NESTING = {"array": lambda n: "x = " + "[" * n + "]" * n, "inline-table": lambda n: "x = " + "{a=" * n + "1" + "}" * n,
           "array-of-tables": lambda n: "x = " + "[{a=" * n + "1" + "}]" * n}


@pytest.mark.parametrize("kind", NESTING, ids=[f"strict-nesting-{k}" for k in NESTING])
@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_deeply_nested_toml(tmp_path, capfd, kind, depth):
    plan = tmp_path / "plan.toml"
    plan.write_text(_plan_text() + NESTING[kind](depth) + "\n")
    refused(capfd, tmp_path, ["run", plan, "--out", tmp_path / "runs"], ("plan.toml", "x"))


INVENTORY = [("ssh", "workdir", "/var/tmp/quicbench/.."), ("ssh", "workdir", "/etc"), ("ssh", "workdir", "/usr/"),
             ("ssh", "workdir", "/var"), ("ssh", "workdir", "/a b"), ("ssh", "workdir", "/x;rm -rf /"),
             ("ssh", "workdir", "/x/./y"), ("server", "bin_dir", "/opt/$(id)"), ("ssh", "python", "python3;id"),
             ("ssh", "python", "python3 -c 'x'"), ("ssh", "python", "$(id)"), ("ssh", "user", "root;id"),
             ("ssh", "user", "-oProxyCommand=id"), ("client", "host", "-oProxyCommand=id"),
             ("router", "host", "-x"), ("client", "host", "a;b"), ("client", "iface", ".."), ("client", "iface", "."),
             ("server", "iface", "-eth0"), ("router", "if_client", ".."), ("client", "address", "8.8.8.8/24"),
             ("client", "address", "10.0.0.1/0"), ("server", "address", "1.1.1.1/32"),
             ("router", "ip_client", "127.0.0.1/8"), ("router", "ip_server", "224.0.0.1/24"),
             ("client", "address", "2001:4860::1/64"), ("client", "address", "fd00::1/0")]


@pytest.mark.parametrize("table,key,value", INVENTORY, ids=[f"strict-inventory-{t}.{k}={v!r}" for t, k, v in INVENTORY])
def test_inventory_checked_when_read(tmp_path, capfd, table, key, value):
    inv = {t: dict(v) for t, v in GOOD_INVENTORY.items()}
    inv.setdefault(table, {})[key] = value
    (tmp_path / "hosts.toml").write_text("\n".join(
        f"[{t}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in items.items()) for t, items in inv.items()))
    plan = tmp_path / "plan.toml"
    plan.write_text(to_toml(GOOD))
    refused(capfd, tmp_path, ["run", plan, "--out", tmp_path / "runs", "--backend", "ssh", "--inventory",
                              tmp_path / "hosts.toml"], key)


# -- leftovers (part 7) ----------------------------------------------------------------------------
def test_publish_onto_a_file(tmp_path, capfd):
    a, _ = _runs(tmp_path)
    (tmp_path / "afile").write_text("x")
    refused(capfd, tmp_path, ["results", "publish", a, tmp_path / "afile"], "not a directory")


def test_publish_a_torn_line(tmp_path, capfd):
    a, _ = _runs(tmp_path)
    with open(a / "trials.jsonl", "a") as f:
        f.write('{"key": "torn", "seq"')
    refused(capfd, tmp_path, ["results", "publish", a, tmp_path / "pub"], "torn")


@pytest.mark.parametrize("command", ["publish", "merge"], ids=["leftover-publish-locked", "leftover-merge-locked"])
def test_a_run_being_written_is_not_read(tmp_path, capfd, command):
    from quicbench.store import RunStore
    a, b = _runs(tmp_path)
    store = RunStore(a)
    store.acquire()                 # this process writes it (a second descriptor conflicts)
    try:
        args = (["results", "publish", a, tmp_path / "pub"] if command == "publish"
                else ["merge", a, b, "--out", tmp_path / "merged"])
        refused(capfd, tmp_path, args, "still being written")
    finally:
        store.release()


def test_corpus_size():
    n = (len(CONTENT_CASES) + len(READER_CASES) + len(LINK_CASES) + len(TRIAL_HAZARDS) + len(RESUME_META) + 2
         + 3 * len(PLAN_NAMES) + len(SCRIPT_FLAGS) + len(DECIDED) + len(REPS_ELSEWHERE) + len(RESUME_MIX) + 3 + len(MERGE_MIX)
         + len(SWEEPS) + len(IGNORED) + len(TYPES) + len(WORKLOAD_STRICT) + len(COND_NAMES) + 2 * len(NESTING) + len(INVENTORY) + 4)
    assert n >= 300, n
