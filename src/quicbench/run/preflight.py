"""Checks of a resolved plan against the drivers and this host, before anything starts.

The plan model (quicbench.model.plan) checks what a plan says; this module checks its
resolution (model/specs.py's ``RunSpec``: the plan's factors as it names them in ``matrix``, the
trials of the run's selection) against the drivers those name: they exist and can do what the
plan asks, so a bad plan fails before a run directory, a lab or a server exists.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from quicbench.clients import CLIENTS, Client, client_class
from quicbench.errors import QuicbenchError
from quicbench.lab import BACKENDS
from quicbench.link import LINKS, link_names
from quicbench.model.plan import Plan
from quicbench.model.shard import Selection
from quicbench.model.specs import MatrixSpec, RunSpec
from quicbench.model.workload_kinds import KINDS
from quicbench.provision import ensure, ensure_available
from quicbench.servers import SERVERS, Server, server_class


def available_cc() -> list[str]:
    try:
        return open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    except OSError:
        return []


def check_plan(plan: Plan, source: str = "plan", installed: bool = False,
               only: dict[str, list[str]] | None = None) -> RunSpec:
    """check_run on the plan resolved for --only's selection, one repetition (with installed:
    the drivers its trials use); returns that resolution."""
    run = Selection(reps=1, only=only).resolve(plan)
    check_run(run, source, installed)
    return run


@dataclass(frozen=True)
class Drivers:
    """The driver class of every client and server a plan names that has one: its
    [client_commands.NAME] / [server_commands.NAME] bound to the command driver, else the
    registered driver. A name missing here is unknown (check_run refuses it, naming it)."""
    clients: dict[str, type[Client]]
    servers: dict[str, type[Server]]


def driver_classes(run: RunSpec) -> Drivers:
    m = run.matrix
    return Drivers(clients={n: client_class(n, run.client_commands) for names in m.clients.values() for n in names
                            if n in CLIENTS or n in run.client_commands},
                   servers={s: server_class(s, run.server_commands) for names in m.servers.values() for s in names
                            if s in SERVERS or s in run.server_commands})


def check_run(run: RunSpec, source: str = "plan", installed: bool = False) -> None:
    """Raise a QuicbenchError naming the field and the accepted values for the first problem of a
    resolved plan: its factors as the plan names them (``run.matrix``, whatever the selection)
    against the drivers they name and this host. With installed, the clients and servers the
    run's trials use must also be installed here."""
    from quicbench.model.study import find_study
    m = run.matrix
    for ref in run.studies:
        try:
            find_study(ref)
        except QuicbenchError as e:
            raise QuicbenchError(f"{source}: {e}") from None
    for table, registry in (("client_commands", CLIENTS), ("server_commands", SERVERS)):
        shadowed = sorted(n for n in getattr(run, table) if n in registry and n != "command")
        if shadowed:
            raise QuicbenchError(f"{source}: {table}.{shadowed[0]}: '{shadowed[0]}' is a built-in driver and rows "
                                 f"would name it; give the command its own name (built-in: "
                                 f"{', '.join(n for n in registry.names() if n != 'command')})")
    drivers = driver_classes(run)
    for w in m.workloads:
        names = m.clients[w.label]
        for name in names:
            if name not in drivers.clients:
                raise QuicbenchError(f"{source}: client: unknown client '{name}' (for {w.label}), accepted: "
                                     f"{', '.join([*CLIENTS.names(), *run.client_commands])} "
                                     f"(a command client is a [client_commands.NAME] table)")
            client = drivers.clients[name]
            if not client.configured:      # the command driver, with no command given
                raise QuicbenchError(f"{source}: client: '{name}' needs a [client_commands.{name}] table "
                                     f"with command = \"...\" (docs/endpoints.md)")
            if len(names) == 1:
                for proto in m.protocols:
                    if proto not in client.protocols:
                        raise QuicbenchError(f"{source}: client: {name} cannot fetch {proto}; "
                                             f"it fetches {', '.join(sorted(client.protocols))}")
            if w.workload_kind.client_connections and w.resumption not in client.resumption_modes:
                raise QuicbenchError(f"{source}: workloads: resumption = '{w.resumption}' cannot be honoured by "
                                     f"client {name}; accepted: {', '.join(client.resumption_modes)}")
            problem = client.workload_problem(w)
            if problem:
                raise QuicbenchError(f"{source}: workloads: {problem} (client {name}, workload {w.label})")
            policies = client.connection_policies
            if w.workload_kind.client_connections and w.connection_kind not in policies:
                raise QuicbenchError(f"{source}: workloads: connections = '{w.connections}' cannot be honoured by "
                                     f"client {name}; accepted: {', '.join(policies)}")
        for proto in m.protocols:
            if not any(proto in drivers.clients[n].protocols for n in names):
                raise QuicbenchError(f"{source}: client: none of {', '.join(names)} fetches {proto}; "
                                     f"add a client that does or drop {proto} from protocols")
    for proto, servers in m.servers.items():
        for srv in servers:
            if srv not in drivers.servers:
                raise QuicbenchError(f"{source}: servers.{proto}: unknown server '{srv}', "
                                     f"accepted: {', '.join([*SERVERS.names(), *run.server_commands])} "
                                     f"(a command server is a [server_commands.NAME] table)")
            cls = drivers.servers[srv]
            if not cls.configured:         # the command driver, with no command given
                raise QuicbenchError(f"{source}: servers.{proto}: '{srv}' needs a [server_commands.{srv}] table "
                                     f"with command = \"...\" (docs/endpoints.md)")
            if proto not in cls.protocols:
                can = [n for n in SERVERS.for_protocol(proto) if n != "command"]   # the contract is no server
                can += [n for n, c in run.server_commands.items() if proto in c.protocols]
                raise QuicbenchError(f"{source}: servers.{proto}: {srv} cannot serve {proto}; servers that can: "
                                     f"{', '.join(can)}")
    for w in m.workloads:
        for name in m.clients[w.label]:
            check_pair(m, drivers, w, name, source)
    link = run.lab.link
    if link not in link_names():
        raise QuicbenchError(f"{source}: link: unknown link emulator '{link}', "
                             f"accepted: {', '.join(link_names())}")
    if link != "auto":
        why = LINKS.get(link).supports
        for c in run.conditions:
            problem = why(c)
            if problem:
                raise QuicbenchError(f"{source}: conditions.{c.name}: {problem}")
    cc = available_cc()
    for tcp_cc in m.tcp_ccs:
        if cc and tcp_cc not in cc:
            raise QuicbenchError(f"{source}: tcp_cc: '{tcp_cc}' is not available in this kernel; "
                                 f"accepted: {', '.join(cc)}")
    if len(m.tcp_ccs) > 1 and not set(m.protocols) & {"h1", "h2"}:
        raise QuicbenchError(f"{source}: tcp_cc: a list sweeps the h1/h2 trials and the plan has none; "
                             f"name one, e.g. tcp_cc = \"{m.tcp_ccs[0]}\"")
    check_quic_cc(m, drivers, source)
    for c in run.conditions:
        if c.rebind_at_s:
            _check_rebinding(m, drivers, c, source)
        for b in c.background:
            if b.cc is not None and cc and b.cc not in cc:
                raise QuicbenchError(f"{source}: conditions.{c.name}.background: cc '{b.cc}' is not available in "
                                     f"this kernel; accepted: {', '.join(cc)}")
        if any(b.protocol == "h3" for b in c.background):
            # background QUIC flows come from the trial's own server
            for proto in m.protocols:
                for srv in m.servers[proto]:
                    if "h3" not in drivers.servers[srv].protocols:
                        raise QuicbenchError(f"{source}: conditions.{c.name}.background: h3 flows come from the "
                                             f"trial's own server, and {srv} (servers.{proto}) does not serve h3; "
                                             f"use tcp flows or an h3 server such as caddy")
    if "netns" not in BACKENDS:
        raise QuicbenchError("no lab backend 'netns' registered")
    if installed:
        for d in trial_drivers(run, drivers):
            ok, why = ensure_available(d)      # installs or builds what it lacks, on first use
            if not ok:
                kind = "server" if issubclass(d, Server) else "client"
                raise QuicbenchError(f"{source}: {kind} {d.name} cannot run on this host: {why}")
        if run.options.capture and shutil.which("tcpdump") is None:
            ensure("capture")
        _check_codecs(m, drivers, source)


def trial_drivers(run: RunSpec, drivers: Drivers) -> list[type]:
    """The driver classes of the clients, then the servers, that the run's trials use (each once,
    in the order the plan names them)."""
    m = run.matrix
    used_clients = {t.client for t in run.trials}
    used_servers = {t.server for t in run.trials}
    clients = dict.fromkeys(n for w in m.workloads for n in m.clients[w.label] if n in used_clients)
    servers = dict.fromkeys(s for p in m.protocols for s in m.servers[p] if s in used_servers)
    return [drivers.clients[n] for n in clients] + [drivers.servers[s] for s in servers]


def kinds_text(client: type) -> str:
    """The workload kinds a client runs, in words."""
    if client.workload_kinds is None:
        browser = ", ".join(k for k in KINDS.names() if KINDS.get(k).browser_managed)
        return f"downloads of objects (any kind but the browser's: {browser})"
    return ", ".join(client.workload_kinds)


def quic_text(driver: type) -> str:
    """'h3 over quic-go' or 'hq-interop over s2n-quic (transport-only)': what an end speaks over QUIC."""
    app = driver.quic_app if driver.quic_app == "h3" else f"{driver.quic_app} (transport-only, no HTTP/3)"
    return f"{app} over {driver.quic_stack or 'its QUIC stack'}"


def check_pair(m: MatrixSpec, drivers: Drivers, w, client_name: str, source: str = "plan") -> None:
    """A receiver the plan pairs with a workload and with each sender must be able to do the pair
    (a capability a driver declares is part of its contract, docs/stacks.md): run the workload's
    kind (a browser loads pages, a download client fetches objects), and for h3 speak the
    sender's application protocol over QUIC (a transport-only sender needs a transport-only
    receiver of the same protocol). The error names the pair and what each side supports."""
    client = drivers.clients[client_name]
    kind = w.workload_kind
    kinds = client.workload_kinds
    if (kinds is not None and w.kind not in kinds) or (kinds is None and kind.browser_managed):
        runners = [n for n in CLIENTS.names() if n != "command"
                   and ((CLIENTS.get(n).workload_kinds is None and not kind.browser_managed)
                        or w.kind in (CLIENTS.get(n).workload_kinds or ()))]
        raise QuicbenchError(f"{source}: client: the pair {client_name} × workload {w.label} (kind {w.kind}) cannot "
                             f"run: {client_name} runs {kinds_text(client)}; clients that run {w.kind}: "
                             f"{', '.join(runners) or 'none'}")
    if "h3" not in m.protocols or "h3" not in client.protocols:
        return
    for srv in m.servers["h3"]:
        server = drivers.servers[srv]
        if "h3" in server.protocols and server.quic_app != client.quic_app:
            raise QuicbenchError(f"{source}: servers.h3: the pair {srv} → {client_name} cannot run: {srv} serves "
                                 f"{quic_text(server)}, {client_name} fetches {quic_text(client)}; pair a sender "
                                 f"with receivers of its application protocol")


def _check_codecs(m: MatrixSpec, drivers: Drivers, source: str) -> None:
    """Every video workload's codec must be one its browsers play on this host."""
    for w in m.workloads:
        codec = w.workload_kind.codec(w)
        if codec is None:
            continue
        for browser, name in zip(m.browsers, m.clients[w.label]):
            playable = drivers.clients[name].playable_codecs()
            if playable is None or codec in playable[0]:
                continue
            codecs, fix = playable
            raise QuicbenchError(f"{source}: browser: {browser} cannot play workloads.codec = '{codec}' ({w.label}) "
                                 f"on this host; it plays: {', '.join(codecs) or 'none'}; fix: {fix}, or use "
                                 f"browser = \"chromium\"")


def quic_cc_accepted(h3_servers: dict[str, type[Server]]) -> str:
    """'ngtcp2: cubic, reno, bbr; caddy: none (its sender is reno)' for a plan's h3 servers."""
    parts = []
    for srv, cls in h3_servers.items():
        if cls.quic_ccs:
            parts.append(f"{srv}: {', '.join(cls.quic_ccs)}")
        else:
            fixed = f" (its sender is {cls.quic_cc_builtin}, fixed)" if cls.quic_cc_builtin else ""
            parts.append(f"{srv}: none{fixed}")
    return "; ".join(parts)


def check_quic_cc(m: MatrixSpec, drivers: Drivers, source: str = "plan") -> None:
    """Every quic_cc the plan asks of an h3 server is one that server's sender can be set to."""
    if m.quic_cc is None:
        return
    h3_servers = {srv: drivers.servers[srv] for srv in m.quic_ccs}
    if not h3_servers:
        raise QuicbenchError(f"{source}: quic_cc: the plan has no h3 trials; add h3 to protocols or leave "
                             f"quic_cc out")
    if isinstance(m.quic_cc, dict):
        for srv in m.quic_cc:
            if srv not in h3_servers:
                raise QuicbenchError(f"{source}: quic_cc.{srv}: '{srv}' is not an h3 server of this plan; "
                                     f"accepted: {', '.join(h3_servers)} (servers.h3)")
    for srv, cls in h3_servers.items():
        for cc in m.quic_ccs[srv]:
            if cc is not None and cc not in cls.quic_ccs:
                field = f"quic_cc.{srv}" if isinstance(m.quic_cc, dict) else "quic_cc"
                fix = (f"ask {srv} for one of those" if cls.quic_ccs else
                       f"ask it only of the servers that can, e.g. quic_cc = {{ ngtcp2 = [\"{cc}\"] }} "
                       f"({srv} keeps its own)")
                raise QuicbenchError(f"{source}: {field}: {srv} cannot set its QUIC sender to '{cc}'; accepted per "
                                     f"server: {quic_cc_accepted(h3_servers)}; {fix}")


def _check_rebinding(m: MatrixSpec, drivers: Drivers, c, source: str) -> None:
    """A NAT rebinding rewrites one known client port: one connection, from a client that binds it."""
    where = f"{source}: conditions.{c.name}.rebind_at_s"
    for w in m.workloads:
        if not w.workload_kind.client_connections:
            raise QuicbenchError(f"{where}: a {w.kind} workload's connections are the browser's; a rebinding "
                                 f"needs objects workloads")
        if w.connections != "shared":
            raise QuicbenchError(f"{where}: workloads.connections = '{w.connections}' opens several connections; "
                                 f"accepted: shared (one connection to rebind)")
        if "h1" in m.protocols and w.parallelism != 1:
            raise QuicbenchError(f"{where}: h1 with parallel = {w.parallelism} opens several connections; "
                                 f"accepted: parallel = 1 (or drop h1)")
        for name in m.clients[w.label]:
            if not drivers.clients[name].binds_local_port:
                raise QuicbenchError(f"{where}: client {name} cannot bind its connection to a given port; "
                                     f"accepted: qb-load")


def check_jobs(jobs: int, backend: str) -> None:
    """--jobs N > 1 needs a backend that can hold N labs at once: the backend says."""
    if jobs > 1:
        why_not = BACKENDS.get(backend).concurrent_labs
        if why_not:
            raise QuicbenchError(f"--jobs {jobs}: the {backend} backend runs one lab at a time ({why_not}); "
                                 f"run --jobs 1")
