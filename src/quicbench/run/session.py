"""A lab session: one lab with its servers, TLS, ports, content and live publishers, and what
can be done with it (run a trial, calibrate a condition, measure the kernel's ceiling).

The runner schedules trials over one session, or over N with ``--jobs`` (run/parallel.py);
both go through the same ``run_one``, so whatever one lab does (link and node fault checks,
the retry of a trial the lab failed, near-ceiling flags, stacks) N labs do too.
"""

from __future__ import annotations

import faulthandler
import platform
import secrets
import signal
import threading
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from quicbench.clients import Target
from quicbench.errors import EnvironmentFault, QuicbenchError
from quicbench.lab import make_lab
from quicbench.model.conditions import Condition
from quicbench.model.specs import RunSpec, TrialSpec
from quicbench.proc import run
from quicbench.registry import driver_stack
from quicbench.run import ceiling as ceiling_
from quicbench.run.trial import base_row, run_trial
from quicbench.servers import server_class
from quicbench.store import RunStore
from quicbench.tls import LAB_HOSTNAME, TlsMaterial, load_or_make_tls

LINK_RESTARTS = 2            # a dead link emulator is restarted this often per run, then the run stops
LINK_WATCH_S = 0.5           # how often a running trial checks that the link emulator lives
TEARDOWN_WATCHDOG_S = 30     # servers and lab go down in a few seconds; past this, dump stacks


@dataclass
class RunContext:
    """What every session of a run shares: the plan resolved (its trials' settings, the lab, the
    command endpoints), the store, the clients and content, where labs are made, the link
    restarts left and the kernel's ceiling once measured."""
    spec: RunSpec
    store: RunStore
    clients: dict[str, Any]
    content: Any
    console: Console
    backend: str = "netns"
    inventory: str | None = None
    ceiling: dict[str, Any] | None = None
    link_restarts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class LabSession:
    """One lab and its endpoints. ``up()`` creates the lab, ``start(tls)`` its servers and
    publishers (the caller makes one certificate for all its labs), ``close()`` tears down."""

    def __init__(self, ctx: RunContext, todo: list[TrialSpec], index: int = 0):
        self.ctx = ctx
        self.index = index
        self.todo = todo
        self.lab: Any = None
        self.servers: dict[str, Any] = {}
        self.publishers: list[Any] = []
        self.tls: TlsMaterial | None = None
        self.ports: dict[str, int] = {}
        self.condition: Condition | None = None
        self.tcp_cc: str | None = None        # the TCP congestion control the nodes run now

    # -- life cycle ------------------------------------------------------------------
    def up(self) -> None:
        spec, todo = self.ctx.spec, self.todo
        # the run's lab as the plan resolved it; this one's name, first condition, owner and binaries
        self.lab = make_lab(spec.lab.model_copy(update=dict(
            name=f"r{secrets.token_hex(3)}", condition=todo[0].condition, run_dir=str(self.ctx.store.dir.resolve()),
            backend=self.ctx.backend, inventory=self.ctx.inventory,
            **needed_binaries(todo, spec.client_commands, spec.server_commands))))
        self.lab.up(conditions=list(spec.conditions))
        self.condition = todo[0].condition
        self.tcp_cc = spec.lab.tcp_cc

    def start(self, tls: TlsMaterial) -> None:
        """Servers (each on its port; lab k > 1 keeps its configs and logs in servers/<name>.lab<k>)
        and, in the first lab, the live publishers: they write the live playlists that every
        lab's servers serve from the shared content directory."""
        spec, store = self.ctx.spec, self.ctx.store
        self.tls = tls
        self.ports = server_ports(self.todo)
        instances = {t.server_instance: (t.server, t.quic_cc) for t in self.todo}
        for name, port in self.ports.items():
            server, quic_cc = instances[name]
            dirname = name.replace("/", "+")      # ngtcp2/bbr keeps its files in servers/ngtcp2+bbr
            d = store.layout.server(dirname if self.index == 0 else f"{dirname}.lab{self.index + 1}")
            srv = server_class(server, spec.server_commands)(self.lab, d, self.ctx.content, tls, port=port,
                                                             quic_cc=quic_cc)
            if self.server_qlog(self.condition):
                srv.enable_qlog()     # the server's loss declarations (run/recovery.py), where it can
            srv.cc_log = spec.verify_cc   # its connection IDs come from the qlogs
            srv.start()
            self.servers[name] = srv
        if self.index == 0:
            from quicbench.content.video import LivePublisher
            for key in sorted(live_video_keys(self.todo)):
                info = self.ctx.content.manifest["videos"][key]
                pub = LivePublisher(self.lab, Path(info["vod"]), Path(info["live_dir"]),
                                    store.dir / "live" / f"{key}.log")
                pub.start()
                self.publishers.append(pub)

    def close(self) -> None:
        """Publishers, servers and the lab down, whatever one of them raises; a hang past the
        watchdog dumps the stacks to stderr."""
        faulthandler.dump_traceback_later(TEARDOWN_WATCHDOG_S)
        try:
            for thing in [*self.publishers, *self.servers.values()]:
                try:
                    thing.stop()
                except Exception:  # noqa: BLE001 - the lab must still go down
                    pass
            if self.lab is not None:
                self.lab.down()
        finally:
            faulthandler.cancel_dump_traceback_later()

    def kill_clients(self) -> None:
        if self.lab is not None:
            try:
                self.lab.kill_node_processes("client")
            except Exception:  # noqa: BLE001 - best effort: the lab goes down anyway
                pass

    def describe(self) -> dict[str, Any]:
        """The lab, link, content, TLS, versions and ports, as meta.json records them."""
        lab, tls = self.lab, self.tls
        origin = self.ctx.content.origin or self.ctx.content.root
        hosts = lab.host_facts()
        return dict(
            lab={"backend": lab.spec.backend, "hops": lab.spec.hops, "tcp_cc": lab.spec.tcp_cc,
                 "tcp_initcwnd": lab.state.get("tcp_initcwnd"),
                 "offload": lab.spec.offload, "addresses": lab.state["addresses"],
                 **({"inventory": lab.spec.inventory} if lab.spec.inventory else {}),
                 **({"hosts": hosts} if hosts else {})},
            link={**lab.link.describe(), **({"auto_passed_over": dict(lab.link_passed_over)}
                                           if lab.spec.link == "auto" and lab.link_passed_over else {})},
            content={"root": str(origin), "key": origin.name},
            tls={"hostname": tls.hostname, "spki_sha256": tls.spki_sha256_b64},
            versions={**{f"client_{n}": c.version() for n, c in self.ctx.clients.items()},
                      **{f"server_{type(s).name}": type(s).version() for s in self.servers.values()}},
            server_ports=self.ports)

    # -- conditions ------------------------------------------------------------------
    def set_condition(self, condition: Condition) -> None:
        if condition != self.condition:
            self.lab.set_condition(condition)
            self.condition = condition
            self.set_server_qlog(self.server_qlog(condition))

    def server_qlog(self, condition: Condition | None) -> bool:
        spec = self.ctx.spec
        return spec.verify_cc or (condition is not None and spec.qlog_for(condition))

    def set_server_qlog(self, on: bool) -> None:
        """Servers write qlog under the conditions that want it (RunSpec.qlog_for): one that must
        start or stop is restarted (a server reads QLOGDIR or its qlog option at start only)."""
        for srv in self.servers.values():
            if (srv.qlog_dir is not None) == on or not (srv.qlog_env or srv.qlog_option):
                continue
            srv.stop()
            if on:
                srv.enable_qlog()
            else:
                srv.qlog_dir = None
            srv.start()

    def set_tcp_cc(self, cc: str | None) -> None:
        """The trial's TCP congestion control as the client's and the server's namespace default
        (net.ipv4.tcp_congestion_control is per network namespace). A connection takes the
        default when it is made (an accepted one too, unless its listener set one itself), so the
        servers keep running; the value is read back from the server node."""
        if cc is None or cc == self.tcp_cc:
            return
        try:
            for node in ("client", "server"):
                run(self.lab.cmd(node, ["sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={cc}"]))
            now = run(self.lab.cmd("server", ["sysctl", "-n", "net.ipv4.tcp_congestion_control"])).stdout.strip()
        except QuicbenchError as e:
            raise EnvironmentFault(f"tcp_cc: cannot set {cc} in the lab's nodes: {e}") from None
        if now != cc:
            raise EnvironmentFault(f"tcp_cc: set {cc} in the server node, it runs {now or 'unknown'}")
        self.tcp_cc = now

    def calibrate(self, condition: Condition, console: Console) -> None:
        """Measure the condition once per run (kept across resumes) and warn when it is off."""
        from quicbench.run.calibrate import calibrate
        store = self.ctx.store
        done = store.read_meta().get("calibration", {})
        if condition.name in done:
            return
        self.set_condition(condition)
        res = calibrate(self.lab, condition, pings=200, iperf_seconds=2.0)
        res["link"] = self.lab.link_name
        store.update_meta(calibration={**store.read_meta().get("calibration", {}), condition.name: res})
        if not res["ok"]:
            bad = "; ".join(f"{k} {v}" for k, v in res["verdicts"].items() if v.startswith(("off", "fail")))
            console.print(f"[yellow]calibration of '{condition.name}' differs from its configuration: {bad}[/]")

    def measure_ceiling(self, todo: list[TrialSpec]) -> dict[str, Any] | None:
        """Inside UML: each protocol's goodput on an unimpaired link, once per run (run/ceiling.py)."""
        store, console = self.ctx.store, self.ctx.console
        meta = store.read_meta()
        if "ceiling" in meta or not ceiling_.wanted():
            return meta.get("ceiling")
        specs = ceiling_.ceiling_specs(todo)
        if not specs:
            return None
        console.print(f"measuring this kernel's ceiling: {', '.join(s.protocol for s in specs)} "
                      f"on an unimpaired link ({specs[0].workload.label}, best of {ceiling_.REPS})")
        self.set_condition(specs[0].condition)

        def fetch(spec, attempt):
            d = store.layout.ceiling(f"{spec.protocol}-{spec.client}-{spec.server_instance.replace('/', '+')}"
                                    f"{'-' + spec.tcp_cc if spec.sweeps_tcp_cc and spec.tcp_cc else ''}-{attempt + 1}")
            d.mkdir(parents=True, exist_ok=True)
            return self.fetch(spec, trial_dir=d)

        result = ceiling_.measure(specs, fetch)
        store.update_meta(ceiling=result)
        top = ", ".join(f"{p} {g:.1f}" for p, g in result["goodput_mbps"].items())
        console.print(f"ceiling (Mbit/s): {top or 'not measured: every fetch failed'}; trials at "
                      f">= {100 * ceiling_.NEAR:.0f} % of it are flagged near_ceiling")
        return result

    # -- trials ----------------------------------------------------------------------
    def run_one(self, spec: TrialSpec, console: Console) -> dict[str, Any]:
        """The trial's row. A trial that the link emulator's death spoiled runs again (after the
        link is restarted); a lab whose nodes are gone stops the run (EnvironmentFault)."""
        self.set_condition(spec.condition)
        seed = spec.link_seed(self.ctx.spec.seed) if self.ctx.spec.link_seed else None
        while True:
            self.ensure_link(spec.condition, console)
            if seed is not None:
                self.lab.link.reseed(seed)
            row = self.fetch(spec)
            if seed is not None:
                row["link_seed"] = seed
            gone = self.lab.node_fault()
            if gone:   # the trial's failure was the lab's: not recorded
                raise EnvironmentFault(f"{gone} during {spec.key}: the run stops; resume it to run "
                                       f"the remaining trials")
            fault = self.lab.link_fault()
            if fault is None:
                return row
            console.print(f"[yellow]{fault} during {spec.key}: the trial runs again[/]")

    def ensure_link(self, condition: Condition, console: Console) -> None:
        """Restart a dead link emulator (at most LINK_RESTARTS times a run, over all labs), else
        stop the run. A lab whose nodes are gone cannot be repaired: the run stops."""
        gone = self.lab.node_fault()
        if gone:
            raise EnvironmentFault(f"{gone}: the run stops; resume it to run the remaining trials")
        fault = self.lab.link_fault()
        if fault is None:
            return
        with self.ctx.lock:
            if self.ctx.link_restarts >= LINK_RESTARTS:
                raise EnvironmentFault(f"{fault}; restarted {self.ctx.link_restarts} times already, the run "
                                       f"stops (see {self.lab.run_dir})")
            self.ctx.link_restarts += 1
            n = self.ctx.link_restarts
        console.print(f"[yellow]{fault}: restarting it ({n}/{LINK_RESTARTS})[/]")
        self.lab.set_condition(condition)
        self.condition = condition

    def fetch(self, spec: TrialSpec, trial_dir: Path | None = None) -> dict[str, Any]:
        """One trial on this lab as it is (no fault handling): its row, ok or failed."""
        ctx, lab = self.ctx, self.lab
        srv = self.servers[spec.server_instance]
        client = ctx.clients[spec.client]
        row: dict[str, Any]
        self.set_tcp_cc(spec.tcp_cc)
        watch = _LinkWatch(lab)
        try:
            if srv.proc is None or srv.proc.poll() is not None:
                srv.start()   # a crashed server is restarted; the previous trial recorded the crash
            target = Target(lab=lab, hostname=self.tls.hostname, address=lab.address("server"),
                            port=self.ports[spec.server_instance], tls=self.tls, content=ctx.content)
            watch.start()
            options = replace(ctx.spec.options, tcp_cc=self.tcp_cc or ctx.spec.options.tcp_cc,
                              qlog=ctx.spec.qlog_for(spec.condition))
            row = run_trial(spec, target, client, srv.pid, trial_dir or ctx.store.trial_dir(spec.seq),
                            ctx.spec.trial_timeout_s, options, server_qlog_dir=srv.qlog_dir, sender=srv)
        except QuicbenchError as e:
            if isinstance(e, EnvironmentFault):
                raise
            row = {**base_row(spec, client.name), "status": "failed", "error": str(e)}
        except Exception as e:   # noqa: BLE001 - a bug in reading one trial's results fails that trial, not the sweep
            row = {**base_row(spec, client.name), "status": "failed", "error": internal_error(e)}
        finally:
            watch.stop()
        # both ends' stacks on every row, a failed one's too (a failure is the pair's as much as a result)
        row.update(server_stack=driver_stack(type(srv)), client_stack=driver_stack(type(client)))
        if row.get("status") != "ok":
            died = server_exit(srv)
            if died:         # say so: the client's own error (refused, timeout) hides that the server died
                row["error"] = f"{died}" + (f"; the client said: {row['error']}" if row.get("error") else "")
        # the host is kept per row: a merged run of shards from several machines can show a per-host effect
        row.update(run_id=ctx.store.run_id, link=lab.link_name, tcp_cc=self.tcp_cc or lab.spec.tcp_cc,
                   tcp_initcwnd=lab.state.get("tcp_initcwnd"), hops=lab.spec.hops,
                   host=platform.node(), near_ceiling=ceiling_.near_ceiling(row, ctx.ceiling), **lab.row_hosts())
        return row


def internal_error(e: BaseException) -> str:
    """A trial's failure that is quicbench's own bug, with where it happened (the innermost frame)."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    return f"quicbench internal error{where}: {type(e).__name__}: {e} (a bug: please report it)"


def server_exit(srv: Any) -> str | None:
    """'server NAME exited (code N | signal S) during the trial' if the server's process is gone."""
    proc = getattr(srv, "proc", None)
    if proc is None or proc.poll() is None:
        return None
    rc = proc.returncode
    try:
        how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"code {rc}"
    except ValueError:
        how = f"signal {-rc}"
    return f"server {srv.name} exited ({how}) during the trial"


def open_sessions(ctx: RunContext, todo: list[TrialSpec], n: int, opened: list[LabSession]) -> None:
    """n labs up, one certificate for all of them, then their servers. Each session is added to
    ``opened`` as soon as its lab exists, so the caller's teardown finds whatever was made."""
    for k in range(n):
        s = LabSession(ctx, todo, index=k)
        opened.append(s)
        s.up()
    # clients reach the server by the lab's hostname; one certificate serves every lab
    tls = load_or_make_tls(ctx.store.layout.tls, LAB_HOSTNAME, ips=[s.lab.address("server") for s in opened])
    for s in opened:
        s.start(tls)


def close_sessions(sessions: list[LabSession]) -> None:
    for s in sessions:
        try:
            s.close()
        except Exception:  # noqa: BLE001 - every lab must still go down
            pass


def server_ports(trials: list[TrialSpec]) -> dict[str, int]:
    """Each server instance of the trials (a server, or server/quic_cc) on its own port: 443, 1443,
    2443, ..."""
    return {name: 443 + 1000 * i for i, name in enumerate(sorted({t.server_instance for t in trials}))}


def live_video_keys(trials: list[TrialSpec]) -> set[str]:
    lives = (t.workload.workload_kind.live_video(t.workload) for t in trials)
    return {spec.key for spec in lives if spec is not None}


def needed_binaries(trials: list[TrialSpec], client_commands: Mapping[str, Any] | None = None,
                    server_commands: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """LabSpec's ``binaries`` (node -> the names the client and server nodes need for these
    trials) and ``binary_facts`` (each one's package, root, version flags), as the drivers declare
    them (a plan's command endpoints by their definitions): a lab on other hosts checks, installs
    and runs them by it."""
    from quicbench.clients import client_class
    drivers = {"client": {client_class(t.client, dict(client_commands or {})) for t in trials},
               "server": {server_class(t.server, dict(server_commands or {})) for t in trials}}
    facts = {b: f for ds in drivers.values() for d in ds for b, f in d.binary_facts().items()}
    return {"binaries": {node: sorted({b for d in ds for b in d.binaries}) for node, ds in drivers.items()},
            "binary_facts": facts}


class _LinkWatch:
    """While a trial runs, check the link emulator; if it dies, end the trial's client at once
    instead of letting it run into its timeout."""

    def __init__(self, lab):
        self.lab = lab
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._watch, daemon=True, name="link-watch")
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(LINK_WATCH_S):
            if self.lab.link_fault() is not None or self.lab.node_fault() is not None:
                self.lab.kill_node_processes("client")
                return

    def stop(self) -> None:
        self.done.set()
        # a Ctrl-C can land inside start(), before the thread ran: there is nothing to join then,
        # and raising here would replace the KeyboardInterrupt (exit 130) with an error
        if self.thread is not None and self.thread.ident is not None:
            self.thread.join(2)
