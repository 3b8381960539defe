"""Checks of a plan against the drivers and this host, before anything starts.

The plan model (quicbench.model.plan) checks what a plan says; this module checks that the
drivers it names exist and can do what it asks, so a bad plan fails before a run directory,
a lab or a server exists.
"""

from __future__ import annotations

import shutil

from quicbench.clients import CLIENTS, client_class
from quicbench.errors import QuicbenchError
from quicbench.lab import BACKENDS
from quicbench.link import LINKS, link_names
from quicbench.model.plan import Plan, expand
from quicbench.model.workload_kinds import KINDS
from quicbench.provision import ensure, ensure_available
from quicbench.servers import SERVERS, Server, server_class


def available_cc() -> list[str]:
    try:
        return open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    except OSError:
        return []


def check_plan(plan: Plan, source: str = "plan", installed: bool = False,
               only: dict[str, list[str]] | None = None) -> None:
    """Raise a QuicbenchError naming the field and the accepted values for the first problem.
    With installed, the clients and servers the plan uses must also be installed here (with only,
    --only's selection: those its trials use)."""
    from quicbench.model.study import find_study
    for ref in ([plan.study] if isinstance(plan.study, str) else plan.study or []):
        try:
            find_study(ref)
        except QuicbenchError as e:
            raise QuicbenchError(f"{source}: {e}") from None
    for table, registry in (("client_commands", CLIENTS), ("server_commands", SERVERS)):
        shadowed = sorted(n for n in getattr(plan, table) if n in registry and n != "command")
        if shadowed:
            raise QuicbenchError(f"{source}: {table}.{shadowed[0]}: '{shadowed[0]}' is a built-in driver and rows "
                                 f"would name it; give the command its own name (built-in: "
                                 f"{', '.join(n for n in registry.names() if n != 'command')})")
    for w in plan.workloads:
        names = plan.clients_for(w)
        for name in names:
            if name not in CLIENTS and name not in plan.client_commands:
                raise QuicbenchError(f"{source}: client: unknown client '{name}' (for {w.label}), accepted: "
                                     f"{', '.join([*CLIENTS.names(), *plan.client_commands])} "
                                     f"(a command client is a [client_commands.NAME] table)")
            client = client_class(name, plan.client_commands)
            if not client.configured:      # the command driver, with no command given
                raise QuicbenchError(f"{source}: client: '{name}' needs a [client_commands.{name}] table "
                                     f"with command = \"...\" (docs/endpoints.md)")
            if len(names) == 1:
                for proto in plan.protocols:
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
        for proto in plan.protocols:
            if not any(proto in client_class(n, plan.client_commands).protocols for n in names):
                raise QuicbenchError(f"{source}: client: none of {', '.join(names)} fetches {proto}; "
                                     f"add a client that does or drop {proto} from protocols")
    for proto in dict.fromkeys([*plan.protocols, *plan.servers]):
        for srv in plan.server_options(proto):
            if srv not in SERVERS and srv not in plan.server_commands:
                raise QuicbenchError(f"{source}: servers.{proto}: unknown server '{srv}', "
                                     f"accepted: {', '.join([*SERVERS.names(), *plan.server_commands])} "
                                     f"(a command server is a [server_commands.NAME] table)")
            cls = server_class(srv, plan.server_commands)
            if not cls.configured:         # the command driver, with no command given
                raise QuicbenchError(f"{source}: servers.{proto}: '{srv}' needs a [server_commands.{srv}] table "
                                     f"with command = \"...\" (docs/endpoints.md)")
            if proto not in cls.protocols:
                can = [n for n in SERVERS.for_protocol(proto) if n != "command"]   # the contract is no server
                can += [n for n, c in plan.server_commands.items() if proto in c.protocols]
                raise QuicbenchError(f"{source}: servers.{proto}: {srv} cannot serve {proto}; servers that can: "
                                     f"{', '.join(can)}")
    for w in plan.workloads:
        for name in plan.clients_for(w):
            check_pair(plan, w, name, source)
    if plan.link not in link_names():
        raise QuicbenchError(f"{source}: link: unknown link emulator '{plan.link}', "
                             f"accepted: {', '.join(link_names())}")
    if plan.link != "auto":
        why = LINKS.get(plan.link).supports
        for c in plan.conditions:
            problem = why(c)
            if problem:
                raise QuicbenchError(f"{source}: conditions.{c.name}: {problem}")
    cc = available_cc()
    for tcp_cc in plan.tcp_ccs:
        if cc and tcp_cc not in cc:
            raise QuicbenchError(f"{source}: tcp_cc: '{tcp_cc}' is not available in this kernel; "
                                 f"accepted: {', '.join(cc)}")
    if len(plan.tcp_ccs) > 1 and not set(plan.protocols) & {"h1", "h2"}:
        raise QuicbenchError(f"{source}: tcp_cc: a list sweeps the h1/h2 trials and the plan has none; "
                             f"name one, e.g. tcp_cc = \"{plan.tcp_ccs[0]}\"")
    check_quic_cc(plan, source)
    for c in plan.conditions:
        if c.rebind_at_s:
            _check_rebinding(plan, c, source)
        for b in c.background:
            if b.cc is not None and cc and b.cc not in cc:
                raise QuicbenchError(f"{source}: conditions.{c.name}.background: cc '{b.cc}' is not available in "
                                     f"this kernel; accepted: {', '.join(cc)}")
        if any(b.protocol == "h3" for b in c.background):
            # background QUIC flows come from the trial's own server
            for proto in plan.protocols:
                for srv in plan.server_options(proto):
                    if "h3" not in server_class(srv, plan.server_commands).protocols:
                        raise QuicbenchError(f"{source}: conditions.{c.name}.background: h3 flows come from the "
                                             f"trial's own server, and {srv} (servers.{proto}) does not serve h3; "
                                             f"use tcp flows or an h3 server such as caddy")
    if "netns" not in BACKENDS:
        raise QuicbenchError("no lab backend 'netns' registered")
    if installed:
        drivers = [client_class(n, plan.client_commands) for w in plan.workloads for n in plan.clients_for(w)]
        drivers += [server_class(s, plan.server_commands) for p in plan.protocols for s in plan.server_options(p)]
        if only:       # what the selected trials use
            trials = expand(plan, reps=1, only=only)
            drivers = [client_class(n, plan.client_commands) for n in dict.fromkeys(t.client for t in trials)]
            drivers += [server_class(s, plan.server_commands) for s in dict.fromkeys(t.server for t in trials)]
        for d in dict.fromkeys(drivers):
            ok, why = ensure_available(d)      # installs or builds what it lacks, on first use
            if not ok:
                kind = "server" if issubclass(d, Server) else "client"
                raise QuicbenchError(f"{source}: {kind} {d.name} cannot run on this host: {why}")
        if plan.capture and shutil.which("tcpdump") is None:
            ensure("capture")
        _check_codecs(plan, source)


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


def check_pair(plan: Plan, w, client_name: str, source: str = "plan") -> None:
    """A receiver the plan pairs with a workload and with each sender must be able to do the pair
    (a capability a driver declares is part of its contract, docs/stacks.md): run the workload's
    kind (a browser loads pages, a download client fetches objects), and for h3 speak the
    sender's application protocol over QUIC (a transport-only sender needs a transport-only
    receiver of the same protocol). The error names the pair and what each side supports."""
    client = client_class(client_name, plan.client_commands)
    kind = w.workload_kind
    kinds = client.workload_kinds
    if (kinds is not None and w.kind not in kinds) or (kinds is None and kind.browser_managed):
        runners = [n for n in CLIENTS.names() if n != "command"
                   and ((CLIENTS.get(n).workload_kinds is None and not kind.browser_managed)
                        or w.kind in (CLIENTS.get(n).workload_kinds or ()))]
        raise QuicbenchError(f"{source}: client: the pair {client_name} × workload {w.label} (kind {w.kind}) cannot "
                             f"run: {client_name} runs {kinds_text(client)}; clients that run {w.kind}: "
                             f"{', '.join(runners) or 'none'}")
    if "h3" not in plan.protocols or "h3" not in client.protocols:
        return
    for srv in plan.server_options("h3"):
        server = server_class(srv, plan.server_commands)
        if "h3" in server.protocols and server.quic_app != client.quic_app:
            raise QuicbenchError(f"{source}: servers.h3: the pair {srv} → {client_name} cannot run: {srv} serves "
                                 f"{quic_text(server)}, {client_name} fetches {quic_text(client)}; pair a sender "
                                 f"with receivers of its application protocol")


def _check_codecs(plan: Plan, source: str) -> None:
    """Every video workload's codec must be one its browsers play on this host."""
    for w in plan.workloads:
        codec = w.workload_kind.codec(w)
        if codec is None:
            continue
        for browser, name in zip(plan.browser_names, plan.clients_for(w)):
            playable = client_class(name, plan.client_commands).playable_codecs()
            if playable is None or codec in playable[0]:
                continue
            codecs, fix = playable
            raise QuicbenchError(f"{source}: browser: {browser} cannot play workloads.codec = '{codec}' ({w.label}) "
                                 f"on this host; it plays: {', '.join(codecs) or 'none'}; fix: {fix}, or use "
                                 f"browser = \"chromium\"")


def quic_cc_accepted(h3_servers: list[str], server_commands: dict) -> str:
    """'ngtcp2: cubic, reno, bbr; caddy: none (its sender is reno)' for a plan's h3 servers."""
    parts = []
    for srv in dict.fromkeys(h3_servers):
        cls = server_class(srv, server_commands)
        if cls.quic_ccs:
            parts.append(f"{srv}: {', '.join(cls.quic_ccs)}")
        else:
            fixed = f" (its sender is {cls.quic_cc_builtin}, fixed)" if cls.quic_cc_builtin else ""
            parts.append(f"{srv}: none{fixed}")
    return "; ".join(parts)


def check_quic_cc(plan: Plan, source: str = "plan") -> None:
    """Every quic_cc the plan asks of an h3 server is one that server's sender can be set to."""
    if plan.quic_cc is None:
        return
    h3_servers = plan.server_options("h3") if "h3" in plan.protocols else []
    if not h3_servers:
        raise QuicbenchError(f"{source}: quic_cc: the plan has no h3 trials; add h3 to protocols or leave "
                             f"quic_cc out")
    if isinstance(plan.quic_cc, dict):
        for srv in plan.quic_cc:
            if srv not in h3_servers:
                raise QuicbenchError(f"{source}: quic_cc.{srv}: '{srv}' is not an h3 server of this plan; "
                                     f"accepted: {', '.join(h3_servers)} (servers.h3)")
    for srv in h3_servers:
        cls = server_class(srv, plan.server_commands)
        for cc in plan.quic_cc_options(srv):
            if cc is not None and cc not in cls.quic_ccs:
                field = f"quic_cc.{srv}" if isinstance(plan.quic_cc, dict) else "quic_cc"
                fix = (f"ask {srv} for one of those" if cls.quic_ccs else
                       f"ask it only of the servers that can, e.g. quic_cc = {{ ngtcp2 = [\"{cc}\"] }} "
                       f"({srv} keeps its own)")
                raise QuicbenchError(f"{source}: {field}: {srv} cannot set its QUIC sender to '{cc}'; accepted per "
                                     f"server: {quic_cc_accepted(plan.server_options('h3'), plan.server_commands)}; {fix}")


def _check_rebinding(plan: Plan, c, source: str) -> None:
    """A NAT rebinding rewrites one known client port: one connection, from a client that binds it."""
    where = f"{source}: conditions.{c.name}.rebind_at_s"
    for w in plan.workloads:
        if not w.workload_kind.client_connections:
            raise QuicbenchError(f"{where}: a {w.kind} workload's connections are the browser's; a rebinding "
                                 f"needs objects workloads")
        if w.connections != "shared":
            raise QuicbenchError(f"{where}: workloads.connections = '{w.connections}' opens several connections; "
                                 f"accepted: shared (one connection to rebind)")
        if "h1" in plan.protocols and w.parallelism != 1:
            raise QuicbenchError(f"{where}: h1 with parallel = {w.parallelism} opens several connections; "
                                 f"accepted: parallel = 1 (or drop h1)")
        for name in plan.clients_for(w):
            if not client_class(name, plan.client_commands).binds_local_port:
                raise QuicbenchError(f"{where}: client {name} cannot bind its connection to a given port; "
                                     f"accepted: qb-load")


def check_jobs(jobs: int, backend: str) -> None:
    """--jobs N > 1 needs a backend that can hold N labs at once: the backend says."""
    if jobs > 1:
        why_not = BACKENDS.get(backend).concurrent_labs
        if why_not:
            raise QuicbenchError(f"--jobs {jobs}: the {backend} backend runs one lab at a time ({why_not}); "
                                 f"run --jobs 1")
