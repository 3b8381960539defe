"""Caddy (Debian package): HTTP/1.1 and HTTP/2 on TCP 443, HTTP/3 on UDP 443, one listener.

Caddy 2.6 cannot run an h2-only listener, and an h3-only one still opens TCP, so the
protocol is forced by the client and checked from what was negotiated.
"""

from __future__ import annotations

import json
import re

from quicbench.paths import find_binary
from quicbench.proc import run
from quicbench.servers.base import NO_CACHE_HEADERS, Server, listen_address


class CaddyServer(Server):
    name = "caddy"
    protocols = frozenset({"h1", "h2", "h3"})
    binary = "caddy"
    install_hint = "apt-get install caddy (or run 'make setup')"

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
        return [find_binary("caddy", self.install_hint), "run", "--config", str(cfg)]

    def env(self) -> dict[str, str]:
        wd = str(self.workdir)
        return {**super().env(), "HOME": wd, "XDG_DATA_HOME": wd, "XDG_CONFIG_HOME": wd}

    @classmethod
    def version(cls) -> dict[str, str]:
        """Caddy's version and the quic-go it was built with: the HTTP/3 sender's loss detection
        (reordering thresholds) is quic-go's, so results depend on it."""
        out = super().version()
        cp = run(["dpkg-query", "-W", "-f", "${Built-Using}", "caddy"], check=False)
        m = re.search(r"golang-github-(?:lucas-clemente|quic-go)-quic-go \(= ([^)]+)\)", cp.stdout)
        if m:
            out["quic_go"] = m.group(1)
        return out

    @classmethod
    def version_text(cls) -> str:
        out = run([find_binary("caddy", cls.install_hint), "version"]).stdout
        m = re.search(r"v?(\d+\.\d+\.\d+\S*)", out)
        return m.group(1) if m else out.strip()
