"""The `uml` kernel driver: a command runs inside User-Mode Linux with the caller's
environment and directory, its output streams back, its exit code comes back, Ctrl-C and
SIGKILL of the caller leave nothing behind; and the CLI's --kernel."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO, root_only, run_qb
from quicbench.kernels import UmlKernel

pytestmark = [pytest.mark.integration, root_only,
              pytest.mark.skipif(not UmlKernel().available()[0], reason=UmlKernel().available()[1])]

# a caller of the driver as the CLI is: SIGINT and SIGTERM raise in the main thread
CALLER = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
from quicbench.kernels import UmlKernel
print("caller", os.getpid(), flush=True)
scratch = tuple(filter(None, [os.environ.get("QB_TEST_SCRATCH")]))
sys.exit(UmlKernel().run(sys.argv[1:], dict(os.environ), os.getcwd(), scratch=scratch))
"""


def uml_processes(caller_pid: int) -> list[int]:
    """Host processes of the UML instance of one caller (its kernel and helpers)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            args = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"umid=qb{caller_pid}".encode() in args:
            found.append(int(d.name))
    return found


def leftovers(caller_pid: int) -> list[str]:
    """UML processes and temporary directories of one caller."""
    left = [f"process {p}" for p in uml_processes(caller_pid)]
    for d in list(Path(tempfile.gettempdir()).glob("qb-uml-*")) + list(Path("/dev/shm").glob("qb-uml-*")):
        pid_file = Path(tempfile.gettempdir()) / d.name / "caller.pid"
        if not pid_file.exists() or pid_file.read_text().strip() == str(caller_pid):
            left.append(str(d))
    if (Path.home() / ".uml" / f"qb{caller_pid}").exists():
        left.append(str(Path.home() / ".uml" / f"qb{caller_pid}"))
    return left


def wait_no_leftovers(caller_pid: int, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := leftovers(caller_pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_runs_a_command_with_env_cwd_private_state_and_exit_code(tmp_path):
    out, err = io.BytesIO(), io.BytesIO()
    script = ("echo out-line; echo err-line >&2; echo \"FOO=$FOO\"; pwd; echo \"STATE=$QUICBENCH_STATE\"; "
              "uname -r; ls /run/quicbench 2>/dev/null | wc -l; "
              "tc qdisc add dev lo root netem delay 1ms && echo netem-ok; "
              "ip netns add qb-umltest && ip netns list; exit 7")
    t0 = time.monotonic()
    rc = UmlKernel().run(["sh", "-c", script], {"FOO": "a b'c", "PATH": os.environ["PATH"],
                                                 "QUICBENCH_STATE": "/somewhere/else"},
                         str(tmp_path), stdout=out, stderr=err)
    took = time.monotonic() - t0
    o, e = out.getvalue().decode(), err.getvalue().decode()
    assert rc == 7
    lines = o.splitlines()
    assert lines[:4] == ["out-line", "FOO=a b'c", str(tmp_path), "STATE=/run/quicbench"], o
    assert lines[4] == UmlKernel().version()["version"]
    assert "netem-ok" in o and "qb-umltest" in o
    assert "err-line" in e and "err-line" not in o
    # the instance's namespace never reached the host
    assert "qb-umltest" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert took < 30, f"boot + command + poweroff took {took:.1f} s"
    assert not wait_no_leftovers(os.getpid(), 5)


@pytest.mark.parallel_safe
def test_missing_command_gives_its_exit_code():
    rc = UmlKernel().run(["/nonexistent/binary"], {"PATH": "/usr/bin:/bin"}, "/", stdout=io.BytesIO(),
                         stderr=io.BytesIO())
    assert rc == 127


def start_caller(*argv: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    p = subprocess.Popen([sys.executable, "-c", CALLER, *argv], cwd=REPO, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    first = p.stdout.readline().split()
    assert first[0] == "caller"
    return p, int(first[1])


def wait_for(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def test_ctrl_c_interrupts_the_command_and_leaves_nothing():
    p, pid = start_caller("sh", "-c", "echo started; exec sleep 120")
    try:
        assert p.stdout.readline().strip() == "started"
        assert uml_processes(pid)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        p.wait(30)
        took = time.monotonic() - t0
    finally:
        p.kill()
    assert p.returncode != 0
    assert took < 10, f"Ctrl-C took {took:.1f} s"
    assert not wait_no_leftovers(pid), leftovers(pid)


@pytest.mark.parallel_safe
def test_sigkill_of_the_caller_leaves_nothing(tmp_path):
    # the caller's own scratch directory (crosscheck's netem.json) goes with UML's
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "netem.json").write_text("{}")
    p, pid = start_caller("sh", "-c", "echo started; exec sleep 120", env={"QB_TEST_SCRATCH": str(scratch)})
    try:
        assert p.stdout.readline().strip() == "started"
        assert uml_processes(pid)
        p.kill()
        p.wait()
    finally:
        p.kill()
    assert not wait_no_leftovers(pid, 15), leftovers(pid)
    assert wait_for(lambda: not scratch.exists(), 5)


def test_cli_kernel_flag(tmp_path):
    bad = run_qb("link", "calibrate", "--kernel", "vm")
    assert bad.returncode == 2 and "unknown kernel 'vm': accepted: host, uml" in bad.stderr
    cp = run_qb("link", "calibrate", "--kernel", "uml", "--link", "netem", "--delay", "5", "--loss", "0",
                "--pings", "50", "--seconds", "0", "--json", cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr + cp.stdout
    res = json.loads(cp.stdout)
    assert res["link"]["name"] == "netem"
    assert 10.0 <= res["ping"]["rtt_p50_ms"] <= 11.0
    doctor = run_qb("doctor")
    assert "kernel: uml" in doctor.stdout and "netem" in doctor.stdout
    assert "boots and runs a command in" in " ".join(doctor.stdout.split()), doctor.stdout   # booted, not only found


@pytest.mark.parallel_safe
def test_one_writer_across_uml_and_a_resume_keeps_its_kernel(tmp_path):
    """A run inside UML writes its run directory on the host; and issue 26, cases 1 and 2: while
    it writes, the host refuses to resume or merge it (UML's flock is its own: run.lock names the
    host process running the kernel); the printed resume, run on the host without --kernel, runs
    inside UML again. (One plan, two UML boots: the run and its resume.)"""
    plan = tmp_path / "p.toml"
    plan.write_text('name = "uml-writer"\nrepetitions = 2\nprotocols = ["h1", "h3"]\n'
                    '[[conditions]]\nname = "j"\ndelay_ms = 5\njitter_ms = 1\n'
                    '[[workloads]]\nsize = "100KB"\ncount = 2\nparallel = "all"\n')
    out = tmp_path / "runs"
    p = subprocess.Popen([sys.executable, "-m", "quicbench.cli.main", "run", str(plan), "--kernel", "uml",
                          "--out", str(out), "--no-report"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, cwd=REPO)
    try:
        deadline = time.monotonic() + 240
        run_dir = None
        while time.monotonic() < deadline:
            dirs = list(out.iterdir()) if out.exists() else []
            if dirs and (dirs[0] / "trials.jsonl").exists() and (dirs[0] / "trials.jsonl").read_text().strip():
                run_dir = dirs[0]
                break
            assert p.poll() is None, p.stdout.read()
            time.sleep(0.2)
        assert run_dir is not None, "no row within 240 s"
        lock = (run_dir / "run.lock").read_text()
        assert f"host process {p.pid}" in lock, lock
        r = run_qb("run", str(plan), "--resume", str(run_dir), "--no-report")
        assert r.returncode == 2 and "being written by" in r.stderr and "User-Mode Linux" in r.stderr, r.stderr
        m = run_qb("merge", str(run_dir), "--out", str(tmp_path / "merged"))
        assert m.returncode == 2 and "still being written" in m.stderr, m.stderr
        assert not (tmp_path / "merged").exists()
        p.send_signal(signal.SIGINT)
        printed = p.communicate(timeout=120)[0]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
    assert json.loads((run_dir / "meta.json").read_text())["status"] == "interrupted"
    # the hint names the kernel the run ran in
    assert f"--resume {run_dir} --kernel uml" in " ".join(printed.split()), printed[-2000:]
    # the resume without --kernel: inside UML again, so every row has UML's netem link
    r = run_qb("run", str(plan), "--resume", str(run_dir), "--no-report", timeout=400)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = [json.loads(l) for l in (run_dir / "trials.jsonl").read_text().splitlines()]
    measured = [r for r in rows if not r.get("warmup")]
    assert len({r["key"] for r in measured}) == 4 and {r["link"] for r in rows} == {"netem"}, rows
    assert sorted(r["protocol"] for r in measured) == ["h1", "h1", "h3", "h3"], rows
    assert all(r["status"] == "ok" for r in rows), rows
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["host"]["kernel_driver"] == "uml"
    assert meta["host"]["kernel"] == UmlKernel().version()["version"]
    # the kernel's own ceiling was measured first (unimpaired link, per protocol), once for the run
    # and its resume, and every row judged by it
    top = meta["ceiling"]["goodput_mbps"]
    assert set(top) == {"h1", "h3"} and all(g > 0 for g in top.values()), meta["ceiling"]
    assert meta["ceiling"]["kernel"] == "uml" and len(meta["ceiling"]["fetches"]) == 4
    for r in rows:
        assert r["near_ceiling"] == (r["goodput_mbps"] >= 0.8 * top[r["protocol"]]), (r, top)
    assert len(list((run_dir / "ceiling").iterdir())) == 4


# Two threads of one process (in UML: one host process whose registers UML switches through
# ptrace, and uml-xstate.so with it) each hold their own values in AVX-512 registers (zmm16,
# opmask k1: the far end of UML's FPU buffer) and yield to each other thousands of times; each
# checks its registers kept its values. Go's and glibc's copies use these registers.
AVX512_THREADS = r"""
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void *hold(void *arg) {
    uint64_t seed = (uint64_t)(uintptr_t)arg, in[8], out[8], k_in = seed * 0x0101 + 7, k_out = 0;
    for (int i = 0; i < 8; i++) in[i] = seed * 1000 + i;
    __asm__ volatile("vmovdqu64 %0, %%zmm16\n\tkmovw %1, %%k1" :: "m"(in), "r"((uint32_t)k_in) : "xmm16", "k1");
    for (int i = 0; i < 3000; i++) sched_yield();
    __asm__ volatile("vmovdqu64 %%zmm16, %0\n\tkmovw %%k1, %k1" : "=m"(out), "=r"(k_out));
    int ok = memcmp(in, out, sizeof in) == 0 && (k_out & 0xffff) == (k_in & 0xffff);
    printf("thread %llu: %s\n", (unsigned long long)seed, ok ? "kept" : "LOST");
    return (void *)(uintptr_t)!ok;
}

int main(void) {
    pthread_t t[2];
    void *bad[2];
    for (uintptr_t i = 0; i < 2; i++) pthread_create(&t[i], NULL, hold, (void *)(i + 1));
    for (int i = 0; i < 2; i++) pthread_join(t[i], &bad[i]);
    return bad[0] || bad[1];
}
"""


@pytest.mark.parallel_safe
@pytest.mark.skipif("avx512f" not in Path("/proc/cpuinfo").read_text().split(),
                    reason="no AVX-512 on this host")
def test_each_guest_thread_keeps_its_avx512_registers(tmp_path):
    src, exe = tmp_path / "avx.c", tmp_path / "avx"
    src.write_text(AVX512_THREADS)
    subprocess.run(["gcc", "-O1", "-mavx512f", "-pthread", "-o", str(exe), str(src)], check=True)
    native = subprocess.run([str(exe)], capture_output=True, text=True)
    assert native.returncode == 0, native.stdout          # the program is right on the host
    out = io.BytesIO()
    rc = UmlKernel().run([str(exe)], dict(os.environ), str(tmp_path), mem="256M", stdout=out, stderr=out)
    assert rc == 0 and out.getvalue().decode().count("kept") == 2, out.getvalue().decode()
