"""nginx (Debian package, 1.22): HTTP/1.1 and HTTP/2 over TLS on one TCP listener.

nginx 1.22 has no HTTP/3 (QUIC arrived in 1.25), so a plan asking nginx for h3 is rejected
at validation. As with Caddy, h1 and h2 share the listener; the client forces the protocol
through ALPN and the trial checks what was negotiated.

The per-run config is independent of /etc/nginx: nginx runs in the foreground
(``daemon off``) with ``-p``/``-c`` in the run's server directory, where its pid file,
error log and temp directories also live. ``worker_processes auto`` (one worker per
core) so that nginx, like Caddy (GOMAXPROCS = all cores), may use the whole machine.
The master runs as root and so do its workers (``user root``): the content set may sit
under a 0700 directory (~/.cache, pytest's tmp), which an unprivileged worker cannot read.
No access log (Caddy keeps none either); errors at ``warn`` go to ``nginx-error.log``.
Two limits are set to Caddy's so that they do not differ between servers: requests per
connection (unlimited in effect; stock 1000) and h2 streams in flight (250; stock 128).
"""

from __future__ import annotations

import re

from quicbench.paths import find_binary
from quicbench.proc import run
from quicbench.model.plan import H2_MAX_STREAMS
from quicbench.servers.base import NO_CACHE_HEADERS, Server, listen_address

# Requests one connection may carry before the server closes it: nginx's default (1000)
# would break long h1/h2 workloads into several connections, which Caddy never does.
KEEPALIVE_REQUESTS = 1_000_000


class NginxServer(Server):
    name = "nginx"
    provisions = ("servers",)
    protocols = frozenset({"h1", "h2"})
    binary = "nginx"
    package = "nginx"
    install_hint = "run 'make servers' (or apt-get install nginx)"

    def config(self) -> str:
        wd = self.workdir
        tmp = wd / "nginx-tmp"
        headers = "\n".join(f'        add_header {k} "{v}" always;' for k, v in NO_CACHE_HEADERS.items())
        temps = "\n".join(f'    {kind}_temp_path "{tmp / kind}";'
                          for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        return f"""# quicbench per-run config (generated; edits are overwritten at the next start)
daemon off;
master_process on;
user root root;
worker_processes auto;
pid "{wd / 'nginx.pid'}";
error_log "{wd / 'nginx-error.log'}" warn;

events {{
    worker_connections 4096;
}}

http {{
    types {{
        text/html html;
        application/json json;
        application/octet-stream bin;
    }}
    default_type application/octet-stream;
    access_log off;
    server_tokens on;
{temps}
    keepalive_requests {KEEPALIVE_REQUESTS};
    http2_max_concurrent_streams {H2_MAX_STREAMS};

    server {{
        listen {listen_address(self.lab.address('server'), self.port)} ssl http2;
        server_name {self.tls.hostname} _;
        ssl_certificate "{self.tls.cert}";
        ssl_certificate_key "{self.tls.key}";
        ssl_protocols TLSv1.2 TLSv1.3;
        root "{self.content.root}";
        index index.html;
        autoindex off;
        # no link under the root is followed (a link made after the start included) ...
        disable_symlinks on from=$document_root;
{headers}
    }}
}}
"""

    def argv(self) -> list[str]:
        wd = self.workdir
        (wd / "nginx-tmp").mkdir(parents=True, exist_ok=True)
        cfg = wd / "nginx.conf"
        cfg.write_text(self.config())
        return [find_binary("nginx", self.install_hint), "-p", f"{wd}/", "-c", str(cfg)]

    @classmethod
    def version_text(cls) -> str:
        cp = run([find_binary("nginx", cls.install_hint), "-v"])
        out = cp.stderr + cp.stdout
        m = re.search(r"nginx/(\d+\.\d+\.\d+\S*)", out)
        return m.group(1) if m else out.strip()
