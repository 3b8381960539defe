"""`command`: a server by contract — any command line a plan names, run in the server node.

A plan defines one in ``[server_commands.NAME]`` (``command``, ``protocols``, ``ready``,
``ready_timeout_s``, ``version``) and names it in ``servers``. The command's placeholders
({listen}, {cert}, {key}, {root}, ..., model.plan.SERVER_PLACEHOLDERS) are filled, each word on
its own (no shell); it must serve the content root over TLS with the given certificate on the
given address and port and run in the foreground until SIGTERM. It is ready when its ``ready``
command (run in the client node) exits 0, or, without one, when the ports of its protocols
listen (TCP for h1/h2, UDP for h3). See docs/endpoints.md.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING, Any, ClassVar

from quicbench.endpoints.command import expand_command, program, run_version
from quicbench.servers.base import Server, listen_address

if TYPE_CHECKING:
    from quicbench.model.plan import ServerCommand


class CommandServer(Server):
    """The driver; ``bind`` makes the class of one [server_commands.NAME] definition."""
    name = "command"
    protocols = frozenset({"h1", "h2", "h3"})
    binary = ""
    install_hint = "define it in the plan: [server_commands.NAME] with command = \"...\" (docs/endpoints.md)"
    spec: ClassVar["ServerCommand | None"] = None
    configured = False     # until bind() gives it a command

    @classmethod
    def bind(cls, name: str, spec: "ServerCommand") -> type["CommandServer"]:
        return type(f"CommandServer_{name}", (cls,), {"name": name, "protocols": frozenset(spec.protocols),
                                                      "spec": spec, "configured": True})

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if cls.spec is None:
            return False, f"server '{cls.name}' needs a [server_commands.{cls.name}] table: {cls.install_hint}"
        if not program(cls.spec.command):
            first = shlex.split(cls.spec.command)[0]
            return False, (f"server_commands.{cls.name}.command: program '{first}' not found "
                           f"(not on PATH or not executable)")
        return True, program(cls.spec.command)

    @classmethod
    def version(cls) -> dict[str, str]:
        return run_version(cls.spec.version if cls.spec else None, cls.name)

    @classmethod
    def version_text(cls) -> str:
        return " ".join(cls.version().values())

    def values(self) -> dict[str, Any]:
        address = self.lab.address("server")
        return {"address": address, "port": self.port, "listen": listen_address(address, self.port),
                "host": self.tls.hostname, "cert": str(self.tls.cert), "key": str(self.tls.key),
                "ca": str(self.tls.ca_cert), "root": str(self.content.root), "dir": str(self.workdir),
                "python": sys.executable, "plan_dir": os.getcwd()}

    def argv(self) -> list[str]:
        assert self.spec is not None, "bind() the driver to a [server_commands.NAME] definition"
        return expand_command(self.spec.command, self.values())

    def start(self, timeout: float | None = None) -> None:
        assert self.spec is not None
        super().start(self.spec.ready_timeout_s if timeout is None else timeout)

    def ready(self) -> bool:
        assert self.spec is not None
        if not self.spec.ready:
            return super().ready()
        argv = self.lab.cmd("client", expand_command(self.spec.ready, self.values()))
        try:
            return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, timeout=5).returncode == 0
        except subprocess.TimeoutExpired:
            return False


def resolve_server(name: str, commands: dict[str, "ServerCommand"], registry) -> type[Server]:
    """The class of a plan's server: a [server_commands.NAME] definition, else a registered driver."""
    if name in commands:
        return CommandServer.bind(name, commands[name])
    return registry.get(name)
