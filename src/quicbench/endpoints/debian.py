"""Which Debian packages are installed, at which version: what a row names as an endpoint's
stack when the stack is a distribution package (ngtcp2's example server and client)."""

from __future__ import annotations

import re

from quicbench.proc import run


def debian_versions(packages: tuple[str, ...]) -> dict[str, str]:
    """Installed Debian package -> version (upstream part: '1.11.0-1~bpo12+1' -> '1.11.0')."""
    cp = run(["dpkg-query", "-W", "-f", "${Package} ${Version} ${Status}\\n", *packages], check=False)
    out = {}
    for line in cp.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and line.endswith("installed") and "not-installed" not in line:
            ver = parts[1].split(":", 1)[-1]
            out[parts[0]] = ver.rsplit("-", 1)[0] if "-" in ver else ver
    return out


def ngtcp2_stack(binary_package: str) -> dict[str, str]:
    """ngtcp2, nghttp3 and GnuTLS versions of an example binary's package (what rows name)."""
    deps = run(["dpkg-query", "-W", "-f", "${Depends}", binary_package], check=False).stdout
    libs = tuple(sorted({m for m in re.findall(r"\b(lib(?:ngtcp2|nghttp3)-\d+|libgnutls\d+)\b", deps)}))
    vers = debian_versions((binary_package, *libs))
    out = {"ngtcp2": vers.get(binary_package, "")}
    for pkg, label in (("libnghttp3", "nghttp3"), ("libgnutls", "gnutls")):
        v = next((v for p, v in vers.items() if p.startswith(pkg)), "")
        if v:
            out[label] = v
    return out
