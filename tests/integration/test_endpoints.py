"""Bring-your-own endpoints: `lab up --serve`, the command client and the command server, end to end."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, lab_namespaces, root_only, run_qb

pytestmark = [pytest.mark.integration, root_only]

CURL_GET = REPO / "tools" / "clients" / "curl_get.py"
AIOQUIC_PROGRAM = "import sys; from quicbench.servers.aioquic import main; sys.exit(main())"


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(l) for l in (run_dir / "trials.jsonl").read_text().splitlines()]


def only_run_dir(out: Path) -> Path:
    dirs = [d for d in out.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def processes_mentioning(text: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if text in l and "ps -eo" not in l]


def test_lab_up_serve_caddy_answers_h1_h2_and_a_second_h3_stack(tmp_path, no_leftovers):
    name = "t-serve"
    r = run_qb("lab", "up", "--name", name, "--delay", "5", "--serve", "caddy", "--sizes", "10KB,100KB")
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        state = json.loads(Path(f"/run/quicbench/labs/{name}.json").read_text())["serve"]
        assert state["server"] == "caddy" and state["pid"]
        for key in ("url", "ca", "spki_sha256"):
            assert state[key] in r.stdout
        assert "--origin-to-force-quic-on=www.quicbench.test:443" in r.stdout and "--resolve" in r.stdout
        url = "https://www.quicbench.test/100KB/obj-1.bin"
        resolve = f"www.quicbench.test:443:{state['address']}"
        for flag, want in (("--http1.1", "1.1"), ("--http2", "2")):
            c = run_qb("lab", "exec", name, "client", "--", "curl", "-sS", "-o", "/dev/null", "-w",
                       "%{http_version} %{size_download}", "--resolve", resolve, "--cacert", state["ca"], flag, url)
            assert c.returncode == 0, c.stderr
            assert c.stdout.split() == [want, "100000"]
        out = tmp_path / "h3.jsonl"
        c = run_qb("lab", "exec", name, "client", "--", sys.executable, str(CURL_GET), "--proto", "h3",
                   "--connect", f"{state['address']}:443", "--ca", state["ca"], "--requests", str(out), url)
        assert c.returncode == 0, c.stderr
        req = json.loads(out.read_text())
        assert req["proto"] == "h3" and req["bytes"] == 100000 and req["status"] == 200
        assert "ngtcp2" in json.loads(c.stdout)["versions"]["libcurl"]      # not quic-go: a second stack
    finally:
        d = run_qb("lab", "down", name)
    assert d.returncode == 0, d.stderr
    assert not [n for n in lab_namespaces() if n.startswith(f"qb-{name}-")]
    assert not processes_mentioning(f"/labs/{name}/serve")      # the detached caddy is gone too


def test_lab_up_serve_own_content(tmp_path, no_leftovers):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "hello.txt").write_text("hello from my own files\n")
    name = "t-serve2"
    r = run_qb("lab", "up", "--name", name, "--serve", "nginx", "--content", str(tmp_path / "site"))
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        state = json.loads(Path(f"/run/quicbench/labs/{name}.json").read_text())["serve"]
        assert state["url"].endswith("/hello.txt") and "h3" not in state["protocols"]
        c = run_qb("lab", "exec", name, "client", "--", "curl", "-sS", "--http2", "--resolve",
                   f"www.quicbench.test:443:{state['address']}", "--cacert", state["ca"], state["url"])
        assert c.stdout == "hello from my own files\n", c.stderr
    finally:
        run_qb("lab", "down", name)


@pytest.mark.parallel_safe
def test_lab_up_serve_refuses_a_link_out_of_the_content(tmp_path, no_leftovers):
    """issue 26 case 3: `ln -s /etc/shadow DIR/s` is refused before a lab exists."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "hello.txt").write_text("hello\n")
    (tmp_path / "site" / "s").symlink_to("/etc/shadow")
    r = run_qb("lab", "up", "--name", "t-symlink", "--serve", "nginx", "--content", str(tmp_path / "site"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--content:" in r.stderr and "s is a link to /etc/shadow, outside the content directory" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not Path("/run/quicbench/labs/t-symlink.json").exists()
    assert not [n for n in lab_namespaces() if n.startswith("qb-t-symlink-")]


@pytest.mark.parallel_safe
@pytest.mark.parametrize("args,needle", [
    (["--serve", "apache"], "missing binary 'apache2'"),      # not installed (PATH without /usr/sbin)
    (["--serve", "lighttpd"], "--serve 'lighttpd': unknown server, accepted: aioquic, apache, apache-prefork, caddy, "
                              "caddy-2.6, netty, nginx, ngtcp2, quiche, quinn, replay"),
    (["--serve", "caddy", "--sizes", "10QB"], "--sizes '10QB'"),
])
def test_lab_up_serve_bad_input_exit_2_nothing_left(tmp_path, args, needle, no_leftovers):
    env = {"QUICBENCH_BIN": str(tmp_path / "nobin"), "PATH": "/usr/bin:/bin"} if "apache" in args else None
    r = run_qb("lab", "up", "--name", "t-bad", *args, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not Path("/run/quicbench/labs/t-bad.json").exists()


CLIENT_PLAN = """
name = "command-client"
protocols = ["h1", "h2", "h3"]
client = "{client}"
repetitions = 1
order = "sequential"
[client_commands.curl]
command = "{python} {tool} --proto {{proto}} --connect {{connect}} --ca {{ca}} --parallel {{parallel}} --manifest {{manifest}} --requests {{out}} {{urls}}"
version = "{python} {tool} --version"
[client_commands.plaincurl]
# exit code and bytes only: Debian's curl writes the bodies to stdout (no HTTP/3 in it)
command = "curl -sS --fail --http1.1 --resolve {{host}}:{{port}}:{{address}} --cacert {{ca}} {{urls}}"
protocols = ["h1"]
[[workloads]]
size = "100KB"
count = 5
[[conditions]]
name = "ten"
delay_ms = 5
"""


def plan_file(tmp_path: Path, client: str, **extra: str) -> Path:
    p = tmp_path / "plan.toml"
    text = CLIENT_PLAN.format(client=client, python=sys.executable, tool=CURL_GET)
    if client == "plaincurl":
        text = text.replace('protocols = ["h1", "h2", "h3"]\n', 'protocols = ["h1"]\n', 1)
    p.write_text(text)
    return p


@pytest.mark.parallel_safe
def test_command_client_h1_h2_h3_through_a_lab(tmp_path, no_leftovers):
    r = run_qb("run", str(plan_file(tmp_path, "curl")), "--out", str(tmp_path / "runs"), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(only_run_dir(tmp_path / "runs"))
    assert sorted(x["protocol"] for x in got) == ["h1", "h2", "h3"]
    for x in got:
        assert x["status"] == "ok", x["error"]
        assert x["client"] == "curl" and x["bytes"] == 500_000
        assert x["protocols"] == f"{x['protocol']}:5"            # negotiated, per request
        assert x["client_cpu_s"] > 0 and x["goodput_mbps"] > 0
    meta = json.loads((only_run_dir(tmp_path / "runs") / "meta.json").read_text())
    assert "ngtcp2" in meta["versions"]["client_curl"]["libcurl"]


@pytest.mark.parallel_safe
def test_command_client_exit_code_and_bytes(tmp_path, no_leftovers):
    r = run_qb("run", str(plan_file(tmp_path, "plaincurl")), "--out", str(tmp_path / "runs"), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    (x,) = rows(only_run_dir(tmp_path / "runs"))
    assert x["status"] == "ok" and x["bytes"] == 500_000 and x["protocols"] == "unverified:5"


@pytest.mark.parallel_safe
def test_two_clients_are_not_pooled(tmp_path, no_leftovers):
    p = plan_file(tmp_path, "curl")
    p.write_text(p.read_text().replace('client = "curl"', 'client = ["qb-load", "curl"]')
                 .replace('protocols = ["h1", "h2", "h3"]\n', 'protocols = ["h3"]\n', 1))
    r = run_qb("run", str(p), "--out", str(tmp_path / "runs"), "--no-report", "--reps", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = only_run_dir(tmp_path / "runs")
    assert {x["client"] for x in rows(run_dir)} == {"qb-load", "curl"}
    j = run_qb("report", str(run_dir), "--format", "json")
    cells = json.loads(j.stdout)["cells"]
    assert sorted(c["protocol"] for c in cells) == ["h3~curl", "h3~qb-load"]
    assert all(c["n"] == 3 for c in cells)


@pytest.mark.parallel_safe
@pytest.mark.parametrize("edit,needle", [
    (lambda t: t.replace("{connect}", "{conect}"), "unknown placeholder(s) {conect}; accepted: {url}"),
    (lambda t: t.replace(f"command = \"{sys.executable}", "command = \"/nonexistent/curl-h3", 1),
     "program '/nonexistent/curl-h3' not found"),
    (lambda t: t.replace('client = "curl"', 'client = "command"'), "needs a [client_commands.command] table"),
])
def test_command_client_bad_input_exit_2_nothing_left(tmp_path, edit, needle, no_leftovers):
    p = plan_file(tmp_path, "curl")
    p.write_text(edit(p.read_text()))
    r = run_qb("run", str(p), "--out", str(tmp_path / "runs"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) <= 3
    assert not (tmp_path / "runs").exists()


SERVER_PLAN = """
name = "command-server"
protocols = ["h3"]
repetitions = 2
[servers]
h3 = "{server}"
[server_commands.pyquic]
# the aioquic driver's own server program, run by contract (any program can be)
command = "{python} -c '{program}' --listen {{listen}} --cert {{cert}} --key {{key}} --root {{root}}"
protocols = ["h3"]
[server_commands.never]
# listens on nothing: readiness never passes
command = "sleep 300"
protocols = ["h3"]
ready_timeout_s = 2
[[workloads]]
size = "100KB"
count = 4
"""


def server_plan(tmp_path: Path, server: str) -> Path:
    p = tmp_path / "srv.toml"
    p.write_text(SERVER_PLAN.format(server=server, python=sys.executable, program=AIOQUIC_PROGRAM))
    return p


@pytest.mark.parallel_safe
def test_command_server_serves_h3(tmp_path, no_leftovers):
    r = run_qb("run", str(server_plan(tmp_path, "pyquic")), "--out", str(tmp_path / "runs"), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(only_run_dir(tmp_path / "runs"))
    assert len(got) == 2
    for x in got:
        assert x["status"] == "ok" and x["server"] == "pyquic" and x["protocols"] == "h3:4"
        assert x["bytes"] == 400_000 and x["server_cpu_s"] > 0


@pytest.mark.parallel_safe
def test_command_server_never_ready_exit_2_nothing_left(tmp_path, no_leftovers):
    r = run_qb("run", str(server_plan(tmp_path, "never")), "--out", str(tmp_path / "runs"), "--no-report")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "server never not listening" in r.stderr or "not ready" in r.stderr, r.stderr
    assert not processes_mentioning("sleep 300")


def test_lab_up_after_a_killed_lab_prints_one_message_a_line(tmp_path, no_leftovers):
    """'reaped lab ...' (stderr) and 'lab ... is up' (stdout) on one stream: two lines, never one."""
    killed = subprocess.run([sys.executable, "-c", "import os\nfrom quicbench.lab import LabSpec, make_lab\n"
                             "make_lab(LabSpec(name='t-killed2')).up()\nos.kill(os.getpid(), 9)"])
    assert killed.returncode == -9
    r = subprocess.run([sys.executable, "-m", "quicbench.cli.main", "lab", "up", "--name", "t-lines",
                        "--delay", "18", "--loss", "3", "--rate", "17"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env={**__import__("os").environ, "COLUMNS": "80"})
    try:
        assert r.returncode == 0, r.stdout
        lines = r.stdout.splitlines()
        # every line is one whole message (another quicbench process may have reaped the lab first)
        reaped = [l for l in lines if l.startswith("reaped lab '")]
        assert all(l.endswith("left behind by a killed process") for l in reaped), lines
        up = [l for l in lines if l.startswith("lab t-lines is up")]
        assert len(up) == 1 and up[0].endswith("17Mbit/s)") and len(reaped) + 1 == len(lines), lines
    finally:
        run_qb("lab", "down", "t-lines")
