"""Lab backend `ssh` over real SSH: Debian's sshd in network namespaces plays the hosts.

Three namespaces (client, router, server host) are wired as a line by veth pairs without
addresses (quicbench adds the lab addresses and removes them); each has a management veth to
the test's namespace on a private 10.213.x.y/30 subnet (no default route: no way out of the
lab, no NAT) and runs its own sshd with a per-test host key and authorized key. The hosts
share this machine's disk, so each gets its own workdir: what quicbench copies lands in a
directory of its own per host, and what it copies back comes from there.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import QB, REPO, root_only

pytestmark = [pytest.mark.integration, root_only,
              pytest.mark.skipif(not Path("/usr/sbin/sshd").exists(), reason="needs openssh-server")]

HOSTS = ("client", "router", "server")
# the controller's build of quicbench's own binaries: the hosts (sharing this disk) run it from there
BIN = Path(os.environ.get("QUICBENCH_BIN", REPO / "build" / "bin"))
LINE = {  # namespace-side interface names of the line client -- router -- server
    "client": ["eth1"], "router": ["c0", "s0"], "server": ["eth1"]}

PLAN = """
name = "ssh-e2e"
protocols = ["h1", "h2", "h3"]
repetitions = {reps}
link = "auto"
{extra}
[[conditions]]
name = "d20"
delay_ms = 20
[[workloads]]
size = "100KB"
count = 4
parallel = 2
"""


def has_files(d: Path) -> bool:
    """d exists and is not empty (it may vanish while we look: the host's cleanup removes it)."""
    try:
        return any(d.iterdir())
    except FileNotFoundError:
        return False


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check)


def nsx(ns: str, *argv: str, check: bool = False) -> subprocess.CompletedProcess:
    return sh("ip", "netns", "exec", ns, *argv, check=check)


class Hosts:
    """The three SSH hosts; inventory() writes an inventory for them."""

    def __init__(self, base: Path, hops: int = 1):
        self.base = base
        self.names = HOSTS if hops == 1 else ("client", "router", "router2", "server")
        self.tag = secrets.token_hex(2)
        self.ns = {h: f"qbs{self.tag}-{h}" for h in self.names}
        k = int(self.tag, 16) % 60 + (60 if hops == 2 else 0)    # the two fixtures never share a subnet
        # management /30 per host: the test's side .1 (host namespace), the host's sshd on .2
        self.mgmt = {h: (f"10.213.{k}.{4 * i + 1}", f"10.213.{k}.{4 * i + 2}") for i, h in enumerate(self.names)}
        self.mgmt_if = {h: f"qbm{self.tag}{i}" for i, h in enumerate(self.names)}
        self.key = base / "id_ed25519"
        self.sshd: dict[str, subprocess.Popen] = {}

    @staticmethod
    def remove_stale() -> None:
        """The hosts of a test session killed outright (SIGKILL: no teardown ran): their namespaces
        hold no process once its sshd is gone; a live session's hold their sshd and stay."""
        for ns in sh("ip", "netns", "list").stdout.split():
            if re.fullmatch(r"qbs[0-9a-f]{4}-(client|router2?|server)", ns) and \
                    not sh("ip", "netns", "pids", ns, check=False).stdout.split():
                sh("ip", "netns", "del", ns, check=False)      # its management veth goes with it

    def up(self) -> None:
        self.remove_stale()
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        Path("/run/sshd").mkdir(exist_ok=True)   # sshd's privilege separation directory
        for h in self.names:
            sh("ip", "netns", "add", self.ns[h])
            nsx(self.ns[h], "ip", "link", "set", "lo", "up", check=True)
        # the line: each host's interface towards the server is eth1 (client) or s0 (routers),
        # towards the client c0 (routers) or eth1 (server)
        for left, right in zip(self.names, self.names[1:]):
            sh("ip", "-n", self.ns[left], "link", "add", "eth1" if left == "client" else "s0", "type", "veth",
               "peer", "name", "eth1" if right == "server" else "c0", "netns", self.ns[right])
        for h in self.names:
            outside, inside = self.mgmt[h]
            sh("ip", "link", "add", self.mgmt_if[h], "type", "veth", "peer", "name", "mgmt0", "netns", self.ns[h])
            sh("ip", "addr", "add", f"{outside}/30", "dev", self.mgmt_if[h])
            sh("ip", "link", "set", self.mgmt_if[h], "up")
            nsx(self.ns[h], "ip", "addr", "add", f"{inside}/30", "dev", "mgmt0", check=True)
            nsx(self.ns[h], "ip", "link", "set", "mgmt0", "up", check=True)
            d = self.base / "sshd" / h
            d.mkdir(parents=True)
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "hostkey"))
            (d / "authorized_keys").write_text(Path(f"{self.key}.pub").read_text())
            (d / "sshd_config").write_text("\n".join([
                f"ListenAddress {inside}", "Port 22", f"HostKey {d / 'hostkey'}", f"PidFile {d / 'sshd.pid'}",
                f"AuthorizedKeysFile {d / 'authorized_keys'}", "PermitRootLogin prohibit-password",
                "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                "MaxSessions 100", "MaxStartups 100", "AllowTcpForwarding yes", "AllowStreamLocalForwarding yes", ""]))
            log = open(d / "sshd.log", "wb")
            self.sshd[h] = subprocess.Popen(["ip", "netns", "exec", self.ns[h], "/usr/sbin/sshd", "-D", "-e",
                                             "-f", str(d / "sshd_config")], stdout=log, stderr=log)
            (self.base / "work" / h).mkdir(parents=True)
        deadline = time.monotonic() + 10
        for h in self.names:
            while "LISTEN" not in nsx(self.ns[h], "ss", "-Hltn", "sport = :22").stdout and "22" not in \
                    nsx(self.ns[h], "ss", "-Hltn", "sport = :22").stdout:
                assert time.monotonic() < deadline, (self.base / "sshd" / h / "sshd.log").read_text()
                time.sleep(0.05)

    def down(self) -> None:
        for p in self.sshd.values():
            p.terminate()
            p.wait(5)
        for h in self.names:
            # SSH sessions still open (sshd forks one per connection) die with their host
            for pid in sh("ip", "netns", "pids", self.ns[h], check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            sh("ip", "link", "del", self.mgmt_if[h], check=False)
            sh("ip", "netns", "del", self.ns[h], check=False)

    def workdir(self, h: str) -> Path:
        return self.base / "work" / h / "qb"

    def inventory(self, path: Path, **override: dict) -> Path:
        last = len(self.names) - 2       # the segment between the last router and the server
        fields = {
            "client": {"host": self.mgmt["client"][1], "iface": "eth1", "address": "198.18.250.1/24",
                       "bin_dir": str(BIN)},
            "router": {"host": self.mgmt["router"][1], "if_client": "c0", "if_server": "s0",
                       "ip_client": "198.18.250.2/24", "ip_server": "198.18.251.1/24",
                       "bin_dir": str(BIN)},
            "router2": {"host": self.mgmt["router2"][1] if "router2" in self.mgmt else "", "if_client": "c0",
                        "if_server": "s0", "ip_client": "198.18.251.2/24", "ip_server": "198.18.252.1/24",
                        "bin_dir": str(BIN)},
            # the server's host runs this checkout's Caddy (its PATH's is Debian's 2.6: refused)
            "server": {"host": self.mgmt["server"][1], "iface": "eth1", "address": f"198.18.{250 + last}.2/24",
                       "bin_dir": str(BIN)},
        }
        lines = ["[ssh]", 'user = "root"', f'key = "{self.key}"', "deadman_s = 6", ""]
        for h in self.names:
            f = {**fields[h], "workdir": str(self.workdir(h)), **override.get(h, {})}
            lines.append(f"[{h}]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in f.items() if v is not None]
            lines.append("")
        path.write_text("\n".join(lines))
        return path

    # -- what a host has of quicbench ----------------------------------------------------
    def foreign_pids(self, h: str) -> list[str]:
        """Processes in the host namespace other than its sshd listener (and the sessions of
        an SSH login still closing)."""
        listener = (self.base / "sshd" / h / "sshd.pid").read_text().strip()
        out = []
        for pid in sh("ip", "netns", "pids", self.ns[h]).stdout.split():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue
            if pid != listener and cmd:
                out.append(f"{pid} {cmd}")
        return out

    def leftovers(self, h: str) -> list[str]:
        left = [f"process {p}" for p in self.foreign_pids(h)]
        wd = self.workdir(h)
        if has_files(wd):
            left.append(f"files {sorted(str(p) for p in wd.rglob('*'))[:5]}")
        addrs = nsx(self.ns[h], "ip", "-4", "-o", "addr", "show").stdout
        if "198.18.25" in addrs:
            left.append(f"lab address: {addrs}")
        routes = nsx(self.ns[h], "ip", "route", "show").stdout
        if "198.18.25" in routes:
            left.append(f"route: {routes}")
        if h.startswith("router"):
            qd = nsx(self.ns[h], "tc", "qdisc", "show").stdout
            if "netem" in qd:
                left.append(f"qdisc: {qd}")
            if nsx(self.ns[h], "cat", "/proc/sys/net/ipv4/ip_forward").stdout.strip() != "0":
                left.append("ip_forward not restored")
        return left

    def wait_clean(self, timeout: float = 30) -> dict[str, list[str]]:
        deadline = time.monotonic() + timeout
        while True:
            left = {h: self.leftovers(h) for h in self.names}
            left = {h: v for h, v in left.items() if v}
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.5)


def controller_leftovers(hosts: Hosts, timeout: float = 20) -> list[str]:
    """Processes on the controller that still talk to the test's hosts (keeper, SSH connections;
    a connection master lingers up to its ControlPersist of 10 s once idle)."""
    ips = [hosts.mgmt[h][1] for h in hosts.names]
    deadline = time.monotonic() + timeout
    while True:
        left = [a for a in sh("ps", "-eo", "args").stdout.splitlines()
                if any(f" {ip}" in a or f'"{ip}"' in a for ip in ips) and "sshd" not in a]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    h = Hosts(tmp_path_factory.mktemp("ssh"))
    try:
        h.up()
        yield h
    finally:
        h.down()


@pytest.fixture
def qb_env(tmp_path):
    # a state directory of the test's own: `lab down --all` and the reaper see only its labs
    return dict(os.environ, QUICBENCH_STATE=str(tmp_path / "state"), COLUMNS="200")


def qb(env, *args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=timeout, env=env)


def only_run_dir(out: Path) -> Path:
    dirs = [d for d in out.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def test_plan_runs_h1_h2_h3_through_a_shaped_router_host(hosts, tmp_path, qb_env):
    plan = tmp_path / "p.toml"
    # TCP's initial window on the client's and the server's route to each other, on their hosts
    plan.write_text(PLAN.format(reps=2, extra="tcp_initcwnd = 20"))
    inv = hosts.inventory(tmp_path / "hosts.toml")
    t0 = time.monotonic()
    cp = qb(qb_env, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--out", str(tmp_path / "runs"))
    took = time.monotonic() - t0
    assert cp.returncode == 0, cp.stdout + cp.stderr
    run = only_run_dir(tmp_path / "runs")
    rows = [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and {r["protocol"] for r in rows} == {"h1", "h2", "h3"}
    for r in rows:
        assert r["status"] == "ok", r["error"]
        assert r["protocols"] == f"{r['protocol']}:4" and r["bytes"] == 4 * 100_000
        assert r["link"] == "linkem"          # this kernel has no netem
        assert r["tcp_initcwnd"] == 20, r
        assert r["client_host"] == hosts.mgmt["client"][1] and r["server_host"] == hosts.mgmt["server"][1]
        assert r["router_hosts"] == hosts.mgmt["router"][1]
        # 20 ms each way through the router host: a request takes at least one 40 ms round trip
        assert r["total_time_s"] > 0.04, r
        # the server's CPU is read on its host (its remote process group), as on a local lab
        assert 0 < r["server_cpu_s"] < r["wall_s"] + 1 and r["server_cpu_wait_s"] >= 0, r
        assert r["machine_cpu_pct"] is None or 0 <= r["machine_cpu_pct"] <= 100, r
        assert r["softirq_wait_s"] is not None and r["softirq_wait_s"] >= 0, r     # read on the hosts too
    # qb-load wrote its per-request file under the client host's workdir (its --requests names the
    # mirror there); the controller's copy, one line per request, came back when it ended
    for r in rows:
        lines = (run / "trials" / f"{r['seq']:05d}" / "requests.jsonl").read_text().splitlines()
        assert len(lines) == 4 and all(json.loads(l)["proto"] == r["protocol"] for l in lines), lines[:1]
    meta = json.loads((run / "meta.json").read_text())
    facts = meta["lab"]["hosts"]
    assert set(facts) == set(HOSTS) and facts["router"]["netem"] is False
    assert "qb-load" in facts["client"]["binaries"]
    assert abs(facts["client"]["clock_offset_s"]) <= facts["client"]["clock_offset_uncertainty_s"] + 0.5
    assert meta["lab"]["backend"] == "ssh"
    assert hosts.wait_clean() == {}
    assert controller_leftovers(hosts) == []
    print(f"\nssh e2e: 6 trials in {took:.1f}s; total_time_s "
          + ", ".join(f"{r['protocol']} {r['total_time_s']:.3f}" for r in rows)
          + "; goodput Mbit/s " + ", ".join(f"{r['goodput_mbps']:.1f}" for r in rows))


def test_deadman_removes_the_shaping_when_the_controller_is_killed(hosts, tmp_path, qb_env):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.format(reps=200, extra=""))
    inv = hosts.inventory(tmp_path / "hosts.toml")
    p = subprocess.Popen([*QB, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--no-report",
                          "--out", str(tmp_path / "runs")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=qb_env)
    def linkem_running() -> bool:
        return any("linkem --iface-a" in x for x in hosts.foreign_pids("router"))

    try:
        deadline = time.monotonic() + 120
        while not linkem_running():
            assert p.poll() is None and time.monotonic() < deadline, "linkem never started on the router host"
            time.sleep(0.2)
        time.sleep(2)          # trials running through the router host
        assert linkem_running()
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    t0 = time.monotonic()
    while linkem_running() or has_files(hosts.workdir("router")):
        assert time.monotonic() - t0 < 30, "the router host still shapes 30 s after the controller died"
        time.sleep(0.1)
    unshaped = time.monotonic() - t0
    left = hosts.wait_clean(timeout=40)
    took = time.monotonic() - t0
    assert left == {}, left
    print(f"\ndead-man: linkem gone and router workdir removed {unshaped:.1f}s after the controller's SIGKILL; "
          f"every host clean (SSH sessions closed too) after {took:.1f}s")
    # the next quicbench command reaps the dead lab on the controller too
    qb(qb_env, "lab", "down", "--all")
    assert controller_leftovers(hosts) == []


def test_ctrl_c_mid_run_leaves_nothing_on_any_host(hosts, tmp_path, qb_env):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.format(reps=200, extra=""))
    inv = hosts.inventory(tmp_path / "hosts.toml")
    p = subprocess.Popen([*QB, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--no-report",
                          "--out", str(tmp_path / "runs")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=qb_env)
    deadline = time.monotonic() + 120
    run = tmp_path / "runs"
    while not (run.exists() and any((d / "trials.jsonl").exists() for d in run.iterdir())):
        assert p.poll() is None and time.monotonic() < deadline, p.stdout.read()
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    out = p.communicate(timeout=90)[0]
    assert p.returncode == 130, out
    assert hosts.wait_clean(timeout=20) == {}
    assert controller_leftovers(hosts) == []


def test_deadman_fires_when_the_network_to_the_controller_is_gone(hosts, tmp_path, qb_env):
    """No heartbeat for deadman_s (6 s here): the router host removes the emulation by itself."""
    inv = hosts.inventory(tmp_path / "hosts.toml")
    cp = qb(qb_env, "lab", "up", "--backend", "ssh", "--inventory", str(inv), "--name", "cut", "--delay", "10")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    try:
        assert any("linkem --iface-a" in x for x in hosts.foreign_pids("router"))
        sh("ip", "link", "set", hosts.mgmt_if["router"], "down")      # the router host loses the controller
        t0 = time.monotonic()
        wd = hosts.workdir("router")
        while any("linkem --iface-a" in x for x in hosts.foreign_pids("router")) or has_files(wd):
            assert time.monotonic() - t0 < 30, "linkem still runs 30 s after the controller became unreachable"
            time.sleep(0.2)
        took = time.monotonic() - t0
        assert took > 3, f"the emulation went after {took:.1f}s, before any dead-man time"
        print(f"\ndead-man (network cut): router unshaped {took:.1f}s after its management link went down")
    finally:
        sh("ip", "link", "set", hosts.mgmt_if["router"], "up")
        sh("ip", "addr", "replace", f"{hosts.mgmt['router'][0]}/30", "dev", hosts.mgmt_if["router"], check=False)
        cp = qb(qb_env, "lab", "down", "cut")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    # the sessions of the cut connection end when sshd notices (ClientAlive is off): not checked here
    left = {h: [x for x in v if "sshd" not in x] for h, v in hosts.wait_clean(timeout=20).items()}
    assert {h: v for h, v in left.items() if v} == {}


@pytest.mark.parametrize("case", ["unreachable", "wrong_key", "missing_binary", "no_iface", "ssh_iface"])
def test_bad_inventory_is_refused_naming_host_and_field(hosts, tmp_path, qb_env, case):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.format(reps=1, extra=""))
    other_key = tmp_path / "other"
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key))
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    override, needle = {
        "unreachable": ({"server": {"host": "10.213.255.254"}}, "server.host"),
        "wrong_key": ({"router": {"key": str(other_key)}}, "router.key"),
        "missing_binary": ({"client": {"bin_dir": str(empty)}}, "client.bin_dir"),
        "no_iface": ({"server": {"iface": "nosuch0"}}, "server.iface"),
        "ssh_iface": ({"router": {"if_server": "mgmt0"}}, "router.if_server"),
    }[case]
    inv = hosts.inventory(tmp_path / "hosts.toml", **override)
    cp = qb(qb_env, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--out", str(tmp_path / "runs"),
            timeout=120)
    assert cp.returncode == 2, cp.stdout + cp.stderr
    msg = cp.stderr.strip()
    assert needle in msg and len(msg.splitlines()) == 1, msg
    if case == "ssh_iface":
        assert "carries the SSH session" in msg
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert hosts.wait_clean(timeout=10) == {}


@pytest.mark.parametrize("case", ["codel_without_linkem", "verify_cc_unreported"])
def test_a_measurement_no_host_can_provide_is_refused_before_the_run(hosts, tmp_path, qb_env, case):
    """CoDel is linkem's alone: a router host without linkem (and this kernel has no netem either)
    cannot apply it; Caddy reports no congestion controller, so verify_cc cannot be checked on its
    host. Both are one line naming the host and the field, exit 2, before any run directory."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    if case == "codel_without_linkem":
        plan_text = PLAN.format(reps=1, extra="").replace('name = "d20"\ndelay_ms = 20', 'name = "aqm"\ndelay_ms = 10\n'
                                                           'rate_mbit = 10\nqueue_discipline = "codel"')
        override, needles = {"router": {"bin_dir": str(empty)}}, ("router.bin_dir", "'aqm'", "queue_discipline")
    else:
        plan_text = PLAN.format(reps=1, extra="verify_cc = true")
        override, needles = {}, ("server.host", "verify_cc", "caddy")
    plan = tmp_path / "p.toml"
    plan.write_text(plan_text)
    inv = hosts.inventory(tmp_path / "hosts.toml", **override)
    cp = qb(qb_env, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--out", str(tmp_path / "runs"),
            timeout=120)
    assert cp.returncode == 2, cp.stdout + cp.stderr
    msg = cp.stderr.strip()
    assert len(msg.splitlines()) == 1 and all(n in msg for n in needles), msg
    assert hosts.mgmt["server" if case != "codel_without_linkem" else "router"][1] in msg, msg
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert hosts.wait_clean(timeout=10) == {}


def test_doctor_reports_each_host(hosts, tmp_path, qb_env):
    inv = hosts.inventory(tmp_path / "hosts.toml")
    cp = qb(qb_env, "doctor", "--backend", "ssh", "--inventory", str(inv), "--json")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    facts = json.loads(cp.stdout)
    assert set(facts) == set(HOSTS)
    assert facts["router"]["netem"] is False and "linkem" in facts["router"]["binaries"]
    assert facts["client"]["ssh_iface"] == "mgmt0" and facts["server"]["binaries"]["caddy"]
    # one clock: the offset is within its measurement's uncertainty (half the round trip, long on a busy machine)
    assert all(abs(f["clock_offset_s"]) <= f["clock_offset_uncertainty_s"] + 0.5 for f in facts.values()), facts
    assert hosts.wait_clean(timeout=15) == {}


def test_inventory_unknown_key_lists_accepted(tmp_path, qb_env):
    inv = tmp_path / "hosts.toml"
    inv.write_text('[client]\nhost = "a"\niface = "eth0"\naddress = "198.18.0.1/24"\ncolour = "red"\n')
    cp = qb(qb_env, "run", "--backend", "ssh", "--inventory", str(inv), "--dry-run")
    assert cp.returncode == 2
    assert "client.colour: unknown key, accepted: " in cp.stderr and "iface" in cp.stderr


def test_lab_up_exec_down_over_ssh(hosts, tmp_path, qb_env):
    inv = hosts.inventory(tmp_path / "hosts.toml")
    cp = qb(qb_env, "lab", "up", "--backend", "ssh", "--inventory", str(inv), "--name", "sshlab", "--delay", "15")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    try:
        st = qb(qb_env, "lab", "status", "--json")
        assert st.returncode == 0, st.stderr
        lab = next(x for x in json.loads(st.stdout) if x["name"] == "sshlab")
        assert lab["backend"] == "ssh" and lab["namespaces"]["router"] == f"root@{hosts.mgmt['router'][1]}"
        assert qb(qb_env, "lab", "status").returncode == 0
        ping = qb(qb_env, "lab", "exec", "sshlab", "client", "--", "ping", "-c", "3", "-i", "0.2", "198.18.251.2")
        assert ping.returncode == 0, ping.stdout + ping.stderr
        rtts = [float(x.split("time=")[1].split()[0]) for x in ping.stdout.splitlines() if "time=" in x]
        assert rtts and min(rtts) >= 30, ping.stdout    # 15 ms each way through linkem on the router host
        cp = qb(qb_env, "lab", "set", "sshlab", "--delay", "40")
        assert cp.returncode == 0, cp.stdout + cp.stderr
        ping = qb(qb_env, "lab", "exec", "sshlab", "client", "--", "ping", "-c", "2", "-i", "0.2", "198.18.251.2")
        rtts = [float(x.split("time=")[1].split()[0]) for x in ping.stdout.splitlines() if "time=" in x]
        assert rtts and min(rtts) >= 80, ping.stdout
    finally:
        cp = qb(qb_env, "lab", "down", "sshlab")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert hosts.wait_clean() == {}


def test_provision_installs_what_a_host_misses(hosts, tmp_path, qb_env):
    """--provision copies quicbench's own binaries to a host that lacks them (Debian packages
    are all present on these hosts, so apt-get is not exercised here)."""
    bin_dir = tmp_path / "client-bin"
    bin_dir.mkdir()
    inv = hosts.inventory(tmp_path / "hosts.toml", client={"bin_dir": str(bin_dir)})
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.format(reps=1, extra=""))
    cp = qb(qb_env, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--out", str(tmp_path / "runs"),
            "--no-report", "--provision", "--only", "protocol=h3")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert os.access(bin_dir / "qb-load", os.X_OK)
    rows = [json.loads(l) for l in next((tmp_path / "runs").iterdir()).joinpath("trials.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok"]
    assert hosts.wait_clean() == {}


@pytest.fixture(scope="module")
def hosts2(tmp_path_factory):
    h = Hosts(tmp_path_factory.mktemp("ssh2"), hops=2)
    try:
        h.up()
        yield h
    finally:
        h.down()


def test_two_router_hosts(hosts2, tmp_path, qb_env):
    """hops = 2: client -- router -- router2 -- server; the one-hop condition shapes the first
    router host, the second forwards (linkem, transparent)."""
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.format(reps=1, extra="").replace(
        'link = "auto"', 'link = "auto"\nhops = 2'))
    inv = hosts2.inventory(tmp_path / "hosts.toml")
    cp = qb(qb_env, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--out", str(tmp_path / "runs"),
            "--no-report")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    rows = [json.loads(l) for l in only_run_dir(tmp_path / "runs").joinpath("trials.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok"] * 3, [r["error"] for r in rows]
    assert all(r["hops"] == 2 and r["router_hosts"] == f"{hosts2.mgmt['router'][1]},{hosts2.mgmt['router2'][1]}"
               and r["total_time_s"] > 0.04 for r in rows)
    assert hosts2.wait_clean() == {}


def test_capture_and_qlog_come_back_from_the_client_host(hosts, tmp_path, qb_env):
    """tcpdump on the client host and qb-load's qlogs: written there, copied back after each trial."""
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.format(reps=1, extra="").replace('link = "auto"', 'link = "auto"\ncapture = true\nqlog = true'))
    inv = hosts.inventory(tmp_path / "hosts.toml")
    cp = qb(qb_env, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--out", str(tmp_path / "runs"),
            "--no-report", "--only", "protocol=h3")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    run = only_run_dir(tmp_path / "runs")
    (row,) = [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines()]
    assert row["status"] == "ok", row["error"]
    assert row["wire_bytes_down"] and row["wire_bytes_down"] > 4 * 100_000, row
    assert list(run.glob("trials/*/qlog/*")), sorted(str(p) for p in run.rglob("*"))[:20]
    assert hosts.wait_clean() == {}


def test_nginx_and_apache_configs_are_mirrored_on_the_server_host(hosts, tmp_path, qb_env):
    """Server configs name local paths (content, certificates, logs, pid files): the server host
    gets rewritten copies that name its own mirrors."""
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.format(reps=1, extra="").replace('protocols = ["h1", "h2", "h3"]', 'protocols = ["h1", "h2"]')
                    + '\n[servers]\nh1 = "apache"\nh2 = "nginx"\n')
    inv = hosts.inventory(tmp_path / "hosts.toml")
    cp = qb(qb_env, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--out", str(tmp_path / "runs"),
            "--no-report")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    rows = [json.loads(l) for l in only_run_dir(tmp_path / "runs").joinpath("trials.jsonl").read_text().splitlines()]
    assert sorted((r["protocol"], r["server"], r["status"]) for r in rows) == [("h1", "apache", "ok"),
                                                                               ("h2", "nginx", "ok")], rows
    assert hosts.wait_clean() == {}


PARITY_PLAN = """
name = "parity"
protocols = ["h1", "h2", "h3"]
repetitions = 1
link = "linkem"
[servers]
h3 = {h3}
[[conditions]]
name = "lossy"
delay_ms = 10
loss_pct = 1
rate_mbit = 50
[[workloads]]
size = "200KB"
count = 4
parallel = 2
"""
# every HTTP/3 server stack, each on its own host as on the namespace lab
PARITY_H3 = ("caddy", "ngtcp2", "quinn", "aioquic", "netty", "quiche", "replay")


def filled_columns(run: Path) -> dict[str, tuple[set[str], set[str]]]:
    """Per protocol and server: (columns filled in every row, columns filled in some row)."""
    rows = [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines()]
    out: dict[str, tuple[set[str], set[str]]] = {}
    for r in rows:
        assert r["status"] == "ok", (r["protocol"], r["server"], r.get("error"))
        have = {k for k, v in r.items() if v is not None}
        every, some = out.get(f"{r['protocol']}@{r['server']}", (have, set()))
        out[f"{r['protocol']}@{r['server']}"] = (every & have, some | have)
    return out


def parity_stacks() -> list[str]:
    from quicbench.servers import SERVERS
    return [s for s in PARITY_H3 if SERVERS.get(s).available()[0]]


@pytest.fixture(scope="module")
def parity_runs(hosts, tmp_path_factory):
    """One lossy plan of h1, h2 and h3 on every HTTP/3 server stack this machine has, run once on
    the namespace lab and once over the SSH hosts (aioquic runs on the hosts' Python: here the
    controller's, as the inventory's `python` names it)."""
    d = tmp_path_factory.mktemp("parity")
    env = dict(os.environ, QUICBENCH_STATE=str(d / "state"), COLUMNS="200")
    stacks = parity_stacks()
    plan = d / "p.toml"
    plan.write_text(PARITY_PLAN.format(h3=json.dumps(stacks)))
    t0 = time.monotonic()
    cp = qb(env, "run", str(plan), "--out", str(d / "netns"), "--no-report")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    t1 = time.monotonic()
    python = {"python": sys.executable}
    inv = hosts.inventory(d / "hosts.toml", client=python, server=python)
    cp = qb(env, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--out", str(d / "ssh"),
            "--no-report")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    t2 = time.monotonic()
    print(f"\nparity: {len(stacks) + 2} trials a backend ({', '.join(stacks)}): namespace lab {t1 - t0:.1f}s, "
          f"ssh hosts {t2 - t1:.1f}s")
    local, remote = filled_columns(only_run_dir(d / "netns")), filled_columns(only_run_dir(d / "ssh"))
    assert set(local) == set(remote) == {"h1@caddy", "h2@caddy", *(f"h3@{s}" for s in stacks)}
    assert hosts.wait_clean() == {}
    return local, remote


@pytest.mark.parametrize("key", ["h1@caddy", "h2@caddy", *(f"h3@{s}" for s in PARITY_H3)])
def test_the_namespace_lab_and_ssh_hosts_fill_the_same_columns(parity_runs, key):
    """A column filled in every row of one backend is filled in some row of the other, unless the
    columns table says which backend alone fills it (docs/hosts.md); each HTTP/3 server stack's
    loss recovery comes from its qlogs on its host."""
    from quicbench.model.columns import backend_differences
    local, remote = parity_runs
    if key not in local:
        pytest.skip(f"{key.split('@')[1]} is not installed here (make setup-all)")
    excused = {c.name: set(c.backends) for c in backend_differences()}
    # filled only when a trial was judged CPU-bound: a verdict on this busy machine, not a
    # measurement one backend lacks
    verdicts = {"cpu_bound_by"}
    (le, ls), (re_, rs) = ((e - verdicts, s - verdicts) for e, s in (local[key], remote[key]))
    only_local = {c for c in le - rs if "ssh" in excused.get(c, {"ssh"})}
    only_remote = {c for c in re_ - ls if "netns" in excused.get(c, {"netns"})}
    assert not only_local and not only_remote, (key, only_local, only_remote)
    from quicbench.servers import SERVERS
    server = SERVERS.get(key.split("@")[1])
    if key.startswith("h3@") and (server.qlog_env or server.qlog_option):      # replay writes none
        # what the hosts added: the QUIC sender's loss recovery from its qlogs, on its host
        assert {"quic_packets_sent", "quic_lost", "quic_qlog_connections"} <= re_, (key, sorted(re_))


CLIENTS_PLAN = """
name = "ssh-clients"
protocols = ["h3"]
repetitions = 1
link = "linkem"
client = {clients}
[[conditions]]
name = "d5"
delay_ms = 5
[[workloads]]
size = "50KB"
count = 2
parallel = 2
"""
PARITY_H3_CLIENTS = ("ngtcp2", "aioquic", "quinn", "quiche", "netty")


def test_every_h3_client_fetches_from_its_host(hosts, tmp_path, qb_env):
    """The HTTP/3 clients besides qb-load run on the client host: their downloads, records and
    qlogs written there come back (the aioquic client's paths travel inside its JSON argument)."""
    from quicbench.clients import CLIENTS
    clients = [c for c in PARITY_H3_CLIENTS if CLIENTS.get(c).available()[0]]
    if not clients:
        pytest.skip("no HTTP/3 client besides qb-load is installed here (make setup-all)")
    plan = tmp_path / "p.toml"
    plan.write_text(CLIENTS_PLAN.format(clients=json.dumps(clients)).replace('link = "linkem"',
                                                                            'link = "linkem"\nqlog = true'))
    python = {"python": sys.executable}
    inv = hosts.inventory(tmp_path / "hosts.toml", client=python, server=python)
    t0 = time.monotonic()
    cp = qb(qb_env, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--out", str(tmp_path / "runs"),
            "--no-report")
    took = time.monotonic() - t0
    assert cp.returncode == 0, cp.stdout + cp.stderr
    run = only_run_dir(tmp_path / "runs")
    rows = [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines()]
    assert sorted(r["client"] for r in rows) == sorted(clients), rows
    for r in rows:
        assert r["status"] == "ok", (r["client"], r["error"])
        assert r["bytes"] == 2 * 50_000 and r["client_stack"], r
        assert list((run / "trials" / f"{r['seq']:05d}").glob("qlog/*")), r["client"]     # the client's qlog
    assert hosts.wait_clean() == {}
    print(f"\nssh clients: {', '.join(clients)} in {took:.1f}s")


def test_a_host_with_another_build_of_a_quicbench_binary_is_refused(hosts, tmp_path, qb_env):
    """The server host's PATH has Debian's Caddy 2.6: without bin_dir its 'caddy' is not this
    controller's build, and the run is refused before it starts, naming the host and the fix."""
    if not Path("/usr/bin/caddy").exists():
        pytest.skip("needs Debian's caddy on PATH (make servers)")
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.format(reps=1, extra=""))
    inv = hosts.inventory(tmp_path / "hosts.toml", server={"bin_dir": None})
    cp = qb(qb_env, "run", str(plan), "--backend", "ssh", "--inventory", str(inv), "--out", str(tmp_path / "runs"))
    assert cp.returncode == 2, cp.stdout + cp.stderr
    line = cp.stderr.strip().splitlines()[-1]
    assert "server" in line and "bin_dir" in line and "'caddy'" in line and "--provision" in line, line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
