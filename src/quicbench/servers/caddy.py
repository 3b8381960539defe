"""Caddy: HTTP/1.1 and HTTP/2 on TCP, HTTP/3 on UDP, one listener.

Two drivers: ``caddy`` is a current Caddy (``CADDY_VERSION``, built by ``make setup`` from the
Go module proxy into build/bin, with the quic-go of its own go.sum); ``caddy-2.6`` is Debian
bookworm's package (2.6.2, quic-go 0.29 of 2022), kept so that older results can be set beside
new ones. The HTTP/3 sender's loss detection is quic-go's, so a row names the stack it ran on
(``server_stack``). Caddy cannot run an h2-only listener, and an h3-only one still opens TCP,
so the protocol is forced by the client and checked from what was negotiated.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from quicbench.errors import QuicbenchError
from quicbench.paths import bin_dir
from quicbench.proc import run
from quicbench.servers.base import NO_CACHE_HEADERS, Server, listen_address


CADDY_VERSION = "v2.11.9"        # the Makefile's CADDY_VERSION builds this one
DEBIAN_CADDY = "/usr/bin/caddy"


class CaddyServer(Server):
    name = "caddy"
    protocols = frozenset({"h1", "h2", "h3"})
    binary = "caddy"
    package = "caddy"              # Debian's is 2.6 (the caddy-2.6 driver); make setup builds the current one
    version_args = ("version",)
    qlog_env = "QLOGDIR"           # Caddy 2.9+ (caddyserver/caddy#6581)
    quic_stack = "quic-go"
    # quic-go's one sender: NewReno (congestion.NewCubicSender(..., true /* use Reno */), backoff
    # 0.7); quic.Config has no congestion-control option and Caddy none either: not settable
    quic_cc_builtin = "reno"
    install_hint = f"run 'make setup' (builds Caddy {CADDY_VERSION} into build/bin)"

    @classmethod
    def binary_facts(cls) -> dict[str, dict[str, Any]]:
        """Built here (build/bin): a host runs the same build (--provision copies it), never its
        PATH's caddy (Debian's 2.6 is the caddy-2.6 driver)."""
        return {"caddy": {"package": None, "root": True, "version_args": list(cls.version_args), "own": True}}

    @classmethod
    def executable(cls) -> str:
        """build/bin/caddy only: the PATH's caddy is Debian's 2.6 (the caddy-2.6 driver)."""
        local = bin_dir() / "caddy"
        if local.is_file() and os.access(local, os.X_OK):
            return str(local)
        raise QuicbenchError(f"missing binary '{local}': {cls.install_hint}")

    def config(self) -> dict:
        wd = self.workdir
        return {
            "admin": {"disabled": True},
            "logging": {"logs": {"default": {"level": "WARN",
                                             "writer": {"output": "file", "filename": str(wd / "caddy-errors.log")}}}},
            "storage": {"module": "file_system", "root": str(wd / "caddy-data")},
            "apps": {
                "http": {"servers": {"lab": {
                    # the lab address only, as nginx and Apache (not every address of the node)
                    "listen": [listen_address(self.lab.address('server'), self.port)],
                    "protocols": sorted(self.protocols),
                    "automatic_https": {"disable": True},
                    "tls_connection_policies": [{"certificate_selection": {"any_tag": ["lab"]},
                                                 "default_sni": self.tls.hostname}],
                    "routes": [{"handle": [
                        {"handler": "headers", "response": {"set": {k: [v] for k, v in NO_CACHE_HEADERS.items()}}},
                        {"handler": "file_server", "root": str(self.content.root)},   # no listings
                    ]}],
                }}},
                "tls": {"certificates": {"load_files": [
                    {"certificate": str(self.tls.cert), "key": str(self.tls.key), "tags": ["lab"]}]}},
            },
        }

    def argv(self) -> list[str]:
        cfg = self.workdir / "caddy.json"
        cfg.write_text(json.dumps(self.config(), indent=1))
        return [self.executable(), "run", "--config", str(cfg)]

    def env(self) -> dict[str, str]:
        wd = str(self.workdir)
        return {**super().env(), "HOME": wd, "XDG_DATA_HOME": wd, "XDG_CONFIG_HOME": wd}

    @classmethod
    def version(cls) -> dict[str, str]:
        """Caddy's version, the quic-go and the Go it was built with: the HTTP/3 sender's loss
        detection (reordering thresholds) is quic-go's, so results depend on it."""
        out = {"caddy": cls.version_text()}
        info = run([cls.executable(), "build-info"], check=False).stdout
        m = re.search(r"^dep\s+github\.com/quic-go/quic-go\s+(\S+)", info, re.M)
        if m:
            out["quic_go"] = m.group(1)
        m = re.search(r"^go\s+(go\S+)", info, re.M)
        if m:
            out["go"] = m.group(1)
        return out

    @classmethod
    def version_text(cls) -> str:
        """From the build's module list ('caddy version' says 'unknown' for a plain go install)."""
        info = run([cls.executable(), "build-info"], check=False).stdout
        m = re.search(r"^(?:mod|dep)\s+github\.com/caddyserver/caddy/v2\s+v?(\S+)", info, re.M)
        if m:
            return m.group(1)
        out = run([cls.executable(), "version"]).stdout
        m = re.search(r"v?(\d+\.\d+\.\d+\S*)", out)
        return m.group(1) if m else out.strip()


class Caddy26Server(CaddyServer):
    """Debian bookworm's Caddy 2.6.2 (quic-go 0.29): the stack of quicbench's results before 2026-11-24."""
    name = "caddy-2.6"
    provisions = ("servers",)
    install_hint = "run 'make servers' (Debian bookworm's caddy 2.6.2)"
    qlog_env = None                # QLOGDIR came with Caddy 2.9

    @classmethod
    def binary_facts(cls) -> dict[str, dict[str, Any]]:
        return {"caddy": {"package": "caddy", "root": True, "version_args": list(cls.version_args), "own": False}}

    @classmethod
    def executable(cls) -> str:
        if os.access(DEBIAN_CADDY, os.X_OK):
            return DEBIAN_CADDY
        raise QuicbenchError(f"missing binary '{DEBIAN_CADDY}': {cls.install_hint}")

    @classmethod
    def version(cls) -> dict[str, str]:
        out = {"caddy": cls.version_text()}
        cp = run(["dpkg-query", "-W", "-f", "${Built-Using}", "caddy"], check=False)
        m = re.search(r"golang-github-(?:lucas-clemente|quic-go)-quic-go \(= ([^)]+)\)", cp.stdout)
        if m:
            out["quic_go"] = m.group(1)
        return out
