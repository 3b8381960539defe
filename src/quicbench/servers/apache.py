"""Apache httpd 2.4 (Debian package): HTTP/1.1, and HTTP/2 through mod_http2 with mpm_event.

Two registered names, as Go-Quick ran both MPMs:

* ``apache``: mpm_event with mod_http2, serves h1 and h2 (ALPN ``h2``, ``http/1.1``).
* ``apache-prefork``: mpm_prefork, serves h1 only. Since 2.4.27 mod_http2 refuses to run
  under prefork ("the currently selected mpm will just not do ... the HTTP/2 protocol will
  be inactive"), so a plan asking apache-prefork for h2 is rejected at validation, naming
  the servers that can.

Neither serves HTTP/3 (httpd has no QUIC).

The per-run config (``httpd.conf`` in the run's server directory) is independent of
/etc/apache2: ServerRoot, PidFile, DefaultRuntimeDir, Mutex and the SSL session cache
live in that directory, modules load from /usr/lib/apache2/modules, and the binary runs
in the foreground (``-DFOREGROUND``). The MPM sizes are Debian's packaged defaults, written
out; keep-alive is unlimited in requests (``MaxKeepAliveRequests 0``; the stock 100 would
split long workloads into extra connections, which Caddy never does) and an h2 connection
carries up to 250 streams at once, as Caddy's (``H2MaxSessionStreams``; stock 100).

httpd refuses to serve as root and switches its workers to ``User`` when started as root;
those workers could not read a content set under a 0700 directory (~/.cache, pytest's
tmp) nor be given the TLS key. So it is started as ``nobody`` by ``setpriv`` with two
ambient capabilities: ``net_bind_service`` (port 443) and ``dac_override`` (read the
content, the key, write its logs in the run directory). Not root, so it keeps that uid.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from quicbench.errors import QuicbenchError
from quicbench.paths import find_binary
from quicbench.proc import run
from quicbench.model.plan import H2_MAX_STREAMS
from quicbench.servers.base import NO_CACHE_HEADERS, Server, listen_address

MODULES_DIR = Path("/usr/lib/apache2/modules")
RUN_AS = "65534"   # nobody / nogroup
CAPS = "+net_bind_service,+dac_override"

# Debian's mods-available/mpm_*.conf, verbatim values
MPM_CONFIG = {
    "event": """StartServers 2
MinSpareThreads 25
MaxSpareThreads 75
ThreadLimit 64
ThreadsPerChild 25
MaxRequestWorkers 150
MaxConnectionsPerChild 0""",
    "prefork": """StartServers 5
MinSpareServers 5
MaxSpareServers 10
MaxRequestWorkers 150
MaxConnectionsPerChild 0""",
}


class ApacheServer(Server):
    name = "apache"
    provisions = ("servers",)
    protocols = frozenset({"h1", "h2"})
    binary = "apache2"
    package = "apache2"
    install_hint = "run 'make servers' (or apt-get install apache2)"
    mpm = "event"

    def modules(self) -> list[tuple[str, str]]:
        mods = [(f"mpm_{self.mpm}_module", f"mod_mpm_{self.mpm}.so"),
                ("authz_core_module", "mod_authz_core.so"),
                ("mime_module", "mod_mime.so"),
                ("dir_module", "mod_dir.so"),
                ("autoindex_module", "mod_autoindex.so"),
                ("headers_module", "mod_headers.so"),
                ("socache_shmcb_module", "mod_socache_shmcb.so"),
                ("ssl_module", "mod_ssl.so")]
        if "h2" in self.protocols:
            mods.append(("http2_module", "mod_http2.so"))
        return mods

    def config(self) -> str:
        wd = self.workdir
        rundir = wd / "apache-run"
        alpn = " ".join(p for p, want in (("h2", "h2"), ("http/1.1", "h1")) if want in self.protocols)
        loads = "\n".join(f"LoadModule {name} {MODULES_DIR / so}" for name, so in self.modules())
        headers = "\n".join(f'Header always set {k} "{v}"' for k, v in NO_CACHE_HEADERS.items())
        root = self.content.root
        h2conf = f"    H2MaxSessionStreams {H2_MAX_STREAMS}\n" if "h2" in self.protocols else ""
        return f"""# quicbench per-run config for {self.name} (generated; edits are overwritten at the next start)
ServerRoot "{wd}"
{loads}

PidFile "{wd / 'apache.pid'}"
DefaultRuntimeDir "{rundir}"
Mutex file:{rundir} default
ErrorLog "{wd / 'apache-error.log'}"
LogLevel warn
ServerName {self.tls.hostname}
ServerTokens Full

{MPM_CONFIG[self.mpm]}
Timeout 300
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 5

TypesConfig /dev/null
AddType text/html .html
AddType application/json .json
AddType application/octet-stream .bin
DirectoryIndex index.html
{headers}

<Directory />
    Options None
    AllowOverride None
    Require all denied
</Directory>
<Directory "{root}">
    # no listings, and no FollowSymLinks: httpd refuses every link (the served copy has none: ContentSet.isolated)
    Options None
    AllowOverride None
    Require all granted
</Directory>

SSLSessionCache "shmcb:{rundir / 'ssl_scache'}(512000)"
SSLProtocol all -SSLv3 -TLSv1 -TLSv1.1
Listen {listen_address(self.lab.address('server'), self.port)} https
<VirtualHost {listen_address(self.lab.address('server'), self.port)}>
    ServerName {self.tls.hostname}
    ServerAlias *
    DocumentRoot "{root}"
    Protocols {alpn}
{h2conf}    SSLEngine on
    SSLCertificateFile "{self.tls.cert}"
    SSLCertificateKeyFile "{self.tls.key}"
</VirtualHost>
"""

    def argv(self) -> list[str]:
        wd = self.workdir
        (wd / "apache-run").mkdir(parents=True, exist_ok=True)
        cfg = wd / "httpd.conf"
        cfg.write_text(self.config())
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise QuicbenchError("missing binary 'setpriv': apt-get install util-linux")
        return [setpriv, f"--reuid={RUN_AS}", f"--regid={RUN_AS}", "--clear-groups",
                f"--inh-caps={CAPS}", f"--ambient-caps={CAPS}", "--",
                find_binary("apache2", self.install_hint), "-DFOREGROUND", "-d", str(wd), "-f", str(cfg)]

    def env(self) -> dict[str, str]:
        # no APACHE_* variables: the config names every path itself
        return {k: v for k, v in super().env().items() if not k.startswith("APACHE_")}

    @classmethod
    def version_text(cls) -> str:
        out = run([find_binary("apache2", cls.install_hint), "-v"]).stdout
        m = re.search(r"Apache/(\d+\.\d+\.\d+\S*)", out)
        ver = m.group(1) if m else out.strip()
        return f"{ver} mpm_{cls.mpm}"


class ApachePreforkServer(ApacheServer):
    name = "apache-prefork"
    protocols = frozenset({"h1"})
    mpm = "prefork"
