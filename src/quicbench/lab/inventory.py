"""The inventory of the `ssh` lab backend: which real hosts play client, router(s) and server.

A TOML file, validated like a plan: unknown keys are refused with the accepted ones, and
every error names the file and the field. See docs/hosts.md.

    [ssh]                       # defaults for every host (each host may override them)
    user = "root"
    key = "~/.ssh/id_ed25519"   # omitted: the SSH agent
    known_hosts = "~/.ssh/known_hosts"   # omitted: accept-new into a file of the lab's own

    [client]
    host = "10.0.0.11"          # where SSH reaches it
    iface = "eth1"              # the interface that faces the router
    address = "198.18.0.1/24"   # its lab address on iface (added if missing, removed afterwards)

    [router]
    host = "10.0.0.12"
    if_client = "eth1"
    if_server = "eth2"
    ip_client = "198.18.0.2/24"
    ip_server = "198.18.1.1/24"

    [server]
    host = "10.0.0.13"
    iface = "eth1"
    address = "198.18.1.2/24"
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from quicbench.errors import QuicbenchError, format_validation_error

IFNAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@:")


def _ifname(v: str) -> str:
    if not v or len(v) > 15 or not set(v) <= IFNAME_CHARS or v in (".", "..") or v.startswith("-"):
        raise ValueError(f"{v!r} is not an interface name (1-15 characters of a-z, A-Z, 0-9, '-_.@:', not '.' "
                         f"or '..', not beginning with '-')")
    return v


# where lab addresses may come from: private, benchmarking (198.18.0.0/15), link-local or documentation
# networks, never a public one (the lab routes between them) nor a whole address space (/0)
def _lab_network_ok(iface: ipaddress.IPv4Interface | ipaddress.IPv6Interface) -> bool:
    bench = ipaddress.ip_network("198.18.0.0/15")
    ip = iface.ip
    return iface.network.prefixlen >= (8 if ip.version == 4 else 16) and (
        ip.is_private or ip.is_link_local or (ip.version == 4 and ip in bench)) and not (
        ip.is_loopback or ip.is_multicast or ip.is_unspecified)


PATH_RE = re.compile(r"/[A-Za-z0-9._/+@-]*")        # inventory paths: no spaces, quotes or shell syntax
PYTHON_RE = re.compile(r"[A-Za-z0-9._/+-]+")


def _iface_address(v: str) -> str:
    try:
        ipaddress.ip_interface(v)
    except ValueError:
        raise ValueError(f"'{v}' is not an address with a prefix length, e.g. 198.18.0.1/24") from None
    if "/" not in v:
        raise ValueError(f"'{v}' needs a prefix length, e.g. {v}/24")
    if not _lab_network_ok(ipaddress.ip_interface(v)):
        raise ValueError(f"'{v}': a lab address is private (RFC 1918, fc00::/7), benchmarking (198.18.0.0/15) "
                         f"or link-local, with a prefix of at least /8 (/16 for IPv6); not a public address or /0")
    return v


SYSTEM_DIRS = {"bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "media", "mnt", "opt", "proc", "root",
               "run", "sbin", "srv", "sys", "tmp", "usr", "var"}


class SshSettings(BaseModel):
    """How to reach a host; [ssh] gives the defaults, each host may override any of them."""
    model_config = ConfigDict(extra="forbid")
    user: str | None = Field(None, pattern=r"^[a-z_][a-z0-9_.-]{0,31}$")
    port: int | None = Field(None, ge=1, le=65535, strict=True)   # strict: "22" is a mistake, not 22
    key: str | None = None            # private key file; None: the agent (SSH_AUTH_SOCK)
    known_hosts: str | None = None    # None: accept-new into a known_hosts file of the lab's own
    workdir: str | None = None        # remote root of everything quicbench puts on the host
    python: str | None = None         # remote python3 (doctor only)
    bin_dir: str | None = None        # where qb-load and linkem are on the host
    deadman_s: float | None = Field(None, ge=2, le=3600)   # remove the emulation this long after the controller is gone

    @field_validator("workdir", "bin_dir")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"'{v}' must be an absolute path on the host")
        if v is not None and not PATH_RE.fullmatch(v):
            raise ValueError(f"{v!r}: a path of letters, digits and . _ / + @ - only")
        if v is not None and any(part in (".", "..") for part in v.split("/")):
            raise ValueError(f"'{v}': no '.' or '..' components; name the directory itself")
        bare = (v or "").rstrip("/")
        if v is not None and (bare in ("", "/tmp", "/var/tmp", "/root", "/home")
                              or bare.count("/") == 1 and bare[1:] in SYSTEM_DIRS):
            raise ValueError(f"'{v}' is a shared directory: quicbench removes its workdir, give one of its own")
        return v

    @field_validator("python")
    @classmethod
    def _python(cls, v: str | None) -> str | None:
        if v is not None and not PYTHON_RE.fullmatch(v):
            raise ValueError(f"{v!r}: a program name or path (letters, digits, . _ / + -), no arguments or shell")
        return v


class HostEntry(SshSettings):
    # SSH address (name or IP; user goes in 'user'); never an option to ssh ('-oProxyCommand=...')
    host: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:\[\]%][A-Za-z0-9_.:\[\]%-]*$")


class EndHost(HostEntry):
    iface: str
    address: str

    _if = field_validator("iface")(classmethod(lambda cls, v: _ifname(v)))
    _addr = field_validator("address")(classmethod(lambda cls, v: _iface_address(v)))


class RouterHost(HostEntry):
    if_client: str
    if_server: str
    ip_client: str
    ip_server: str

    _if = field_validator("if_client", "if_server")(classmethod(lambda cls, v: _ifname(v)))
    _addr = field_validator("ip_client", "ip_server")(classmethod(lambda cls, v: _iface_address(v)))


DEFAULTS = {"user": "root", "port": 22, "workdir": "/var/tmp/quicbench", "deadman_s": 15.0}


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ssh: SshSettings = SshSettings()
    client: EndHost
    router: RouterHost
    router2: RouterHost | None = None
    server: EndHost

    def nodes(self, hops: int) -> list[str]:
        return ["client", "router", *(["router2"] if hops == 2 else []), "server"]

    def host(self, node: str) -> EndHost | RouterHost:
        h = getattr(self, node)
        if h is None:
            raise QuicbenchError("inventory: router2: a plan with hops = 2 needs a [router2] host")
        return h

    def lab_ifaces(self, node: str) -> dict[str, str]:
        """field -> interface name of node's lab interfaces."""
        h = self.host(node)
        if isinstance(h, EndHost):
            return {"iface": h.iface}
        return {"if_client": h.if_client, "if_server": h.if_server}

    def lab_addresses(self, node: str) -> dict[str, str]:
        """interface -> lab address with prefix."""
        h = self.host(node)
        if isinstance(h, EndHost):
            return {h.iface: h.address}
        return {h.if_client: h.ip_client, h.if_server: h.ip_server}

    def setting(self, node: str, key: str) -> Any:
        """A host's own value, else [ssh]'s, else the built-in default."""
        v = getattr(self.host(node), key)
        if v is None:
            v = getattr(self.ssh, key)
        return DEFAULTS.get(key) if v is None else v


def _unknown_keys(model: type[BaseModel], data: Any, where: str) -> str | None:
    """The first key that model does not know, with the accepted ones (pydantic would only say
    'extra inputs are not permitted')."""
    if not isinstance(data, dict):
        return None
    fields = model.model_fields
    for k, v in data.items():
        if k not in fields:
            return f"{where}{k}: unknown key, accepted: {', '.join(fields)}"
        ann = fields[k].annotation
        sub = next((t for t in (getattr(ann, "__args__", None) or (ann,))
                    if isinstance(t, type) and issubclass(t, BaseModel)), None)
        if sub is not None:
            problem = _unknown_keys(sub, v, f"{where}{k}.")
            if problem:
                return problem
    return None


def load_inventory(path: Path | str) -> Inventory:
    path = Path(path)
    source = f"inventory {path}"
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise QuicbenchError(f"--inventory: no file {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise QuicbenchError(f"--inventory: cannot read {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise QuicbenchError(f"{source}: not valid TOML: {e}") from None
    problem = _unknown_keys(Inventory, data, "")
    if problem:
        raise QuicbenchError(f"{source}: {problem}")
    try:
        inv = Inventory.model_validate(data)
    except ValidationError as e:
        raise QuicbenchError(format_validation_error(e, source)) from None
    for node in ("client", "router", "router2", "server"):
        h = getattr(inv, node)
        if h is None:
            continue
        key = inv.setting(node, "key")
        if key and not Path(key).expanduser().is_file():
            raise QuicbenchError(f"{source}: {node}.key: no key file {key} on the controller")
        kh = inv.setting(node, "known_hosts")
        if kh and not Path(kh).expanduser().is_file():
            raise QuicbenchError(f"{source}: {node}.known_hosts: no file {kh} on the controller")
    return inv
