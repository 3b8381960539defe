"""Page archives: a HAR 1.2 file with response bodies, read, checked and laid out for replay.

A page archive is what a browser's developer tools export (or ``quicbench page record`` and
``quicbench page generate`` write): every request of one page load with its response and body
(``content.text``, text or base64). ``read_archive`` checks it and maps each request to its
origin; content/replay.py lays it out in a content set for the ``replay`` server (``qb-replay``),
which serves every origin under its own name, with the recorded status, headers and body
(docs/pages.md).

Bad input raises ``QuicbenchError`` naming the entry and why: a file that is not HAR 1.2, an
entry without its body, an origin that cannot be served (an IP literal, plain http), and two
entries for the same request that disagree.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import ipaddress
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from quicbench.errors import QuicbenchError

MAX_HAR_BYTES = 512 << 20
# headers a replay never sends as recorded: hop-by-hop ones (RFC 9110 7.6.1), HTTP/2 and /3
# pseudo-headers, the length and coding of a body that the HAR holds decoded, and Alt-Svc (the
# replay server advertises its own HTTP/3, per protocol)
DROPPED_HEADERS = frozenset({
    "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te",
    "trailer", "transfer-encoding", "upgrade", "content-length", "content-encoding", "alt-svc",
})
# statuses whose responses carry no body: an entry of one needs no content.text
BODYLESS = frozenset({204, 205, 304})


@dataclass(frozen=True)
class Entry:
    """One recorded request and its response."""
    index: int                # position in the HAR's entries (0-based), for messages
    method: str
    url: str
    scheme: str
    host: str
    port: int
    path: str
    query: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    mime: str = ""

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.host}" + ("" if self.port == 443 else f":{self.port}")

    @property
    def request_key(self) -> tuple[str, str, int, str, str]:
        return (self.method, self.host, self.port, self.path, self.query)

    @property
    def body_sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


@dataclass(frozen=True)
class Archive:
    """A page archive: its page URL (the first request), its entries (one per distinct request)."""
    source: str
    page_url: str
    entries: tuple[Entry, ...]
    recorded: int                                   # entries in the HAR, duplicates included
    digest: str = field(default="")                 # SHA-256 of the file

    @property
    def origins(self) -> list[str]:
        return sorted({e.origin for e in self.entries})

    @property
    def hosts(self) -> list[tuple[str, int]]:
        return sorted({(e.host, e.port) for e in self.entries})

    @property
    def body_bytes(self) -> int:
        return sum(len(e.body) for e in self.entries)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


def _entry_name(i: int, url: str | None) -> str:
    return f"entry {i}" + (f" ({url})" if url else "")


def _bad(source: str, what: str) -> QuicbenchError:
    return QuicbenchError(f"{source}: {what}")


def parse_entry(i: int, e: Any, source: str) -> Entry:
    """One HAR entry -> Entry, or QuicbenchError naming it and why it cannot be replayed."""
    if not isinstance(e, dict) or not isinstance(e.get("request"), dict) or not isinstance(e.get("response"), dict):
        raise _bad(source, f"{_entry_name(i, None)}: not a HAR entry (needs request and response objects)")
    req, resp = e["request"], e["response"]
    url = req.get("url")
    name = _entry_name(i, url if isinstance(url, str) else None)
    if not isinstance(url, str) or not isinstance(req.get("method"), str):
        raise _bad(source, f"{name}: request needs url and method strings")
    parts = urlsplit(url)
    if parts.scheme == "http":
        raise _bad(source, f"{name}: plain http cannot be replayed (h2 and h3 need TLS; the replay serves "
                           "https origins only)")
    if parts.scheme != "https":
        raise _bad(source, f"{name}: scheme {parts.scheme!r} cannot be replayed; accepted: https")
    host = (parts.hostname or "").lower()
    if not host:
        raise _bad(source, f"{name}: URL without a host")
    if _is_ip(host):
        raise _bad(source, f"{name}: origin {host} is an IP literal; an origin must be a name (served under its "
                           "own name and certificate)")
    try:
        port = parts.port or 443
    except ValueError:
        raise _bad(source, f"{name}: bad port in URL") from None
    status = resp.get("status")
    if not isinstance(status, int) or not 100 <= status <= 599:
        raise _bad(source, f"{name}: response status {status!r} is not an HTTP status (100-599); a request "
                           "that got no response cannot be replayed")
    raw_headers = resp.get("headers") or []
    for h in raw_headers:
        if not isinstance(h, dict) or not isinstance(h.get("name"), str) or not isinstance(h.get("value"), str):
            raise _bad(source, f"{name}: response header {h!r} is not {{name, value}}")
    # hop-by-hop: the fixed ones and those the response's Connection header names
    hop = DROPPED_HEADERS | {t.strip().lower() for h in raw_headers if h["name"].lower() == "connection"
                             for t in h["value"].split(",") if t.strip()}
    headers = [(h["name"], h["value"]) for h in raw_headers if not h["name"].startswith(":")
               and h["name"].lower() not in hop]
    content = resp.get("content")
    if not isinstance(content, dict):
        raise _bad(source, f"{name}: response without content")
    text = content.get("text")
    size = content.get("size")
    if text is None:
        if status in BODYLESS or (300 <= status < 400) or (isinstance(size, int) and size == 0):
            body = b""
        else:
            raise _bad(source, f"{name}: no response body (content.text); export the HAR with content "
                               "(DevTools: 'Save all as HAR with content'; quicbench page record)")
    elif not isinstance(text, str):
        raise _bad(source, f"{name}: content.text is not a string")
    elif content.get("encoding") == "base64":
        try:
            body = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise _bad(source, f"{name}: content.text is not valid base64") from None
    elif content.get("encoding") not in (None, ""):
        raise _bad(source, f"{name}: content.encoding {content.get('encoding')!r}; accepted: base64 or none")
    else:
        body = text.encode("utf-8")
    return Entry(index=i, method=req["method"].upper(), url=url, scheme="https", host=host, port=port,
                 path=parts.path or "/", query=parts.query, status=status, headers=tuple(headers), body=body,
                 mime=str(content.get("mimeType") or ""))


def parse_har(data: Any, source: str = "HAR") -> Archive:
    """A parsed HAR document -> Archive (QuicbenchError naming the entry and why when it cannot be replayed)."""
    log = data.get("log") if isinstance(data, dict) else None
    if not isinstance(log, dict) or not isinstance(log.get("entries"), list):
        raise _bad(source, "not a HAR file (needs a log object with an entries list)")
    version = log.get("version")
    if version not in ("1.2", "1.1"):
        raise _bad(source, f"HAR version {version!r}; accepted: 1.2")
    raw = log["entries"]
    if not raw:
        raise _bad(source, "HAR without entries: nothing to replay")
    entries: list[Entry] = []
    seen: dict[tuple, Entry] = {}
    for i, e in enumerate(raw):
        entry = parse_entry(i, e, source)
        prev = seen.get(entry.request_key)
        if prev is not None:
            why = [w for w, differs in (("status", prev.status != entry.status), ("body", prev.body != entry.body))
                   if differs]
            if why:
                raise _bad(source, f"{_entry_name(i, entry.url)}: duplicate of entry {prev.index} with a different "
                                   f"{' and '.join(why)} ({prev.status}/{len(prev.body)} B vs {entry.status}/"
                                   f"{len(entry.body)} B); a replay can serve only one")
            continue
        seen[entry.request_key] = entry
        entries.append(entry)
    first = entries[0]
    return Archive(source=source, page_url=first.url, entries=tuple(entries), recorded=len(raw))


@functools.lru_cache(maxsize=32)
def _read_cached(path: str, mtime_ns: int, size: int) -> Archive:
    raw = Path(path).read_bytes()
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _bad(path, f"not a HAR file (not JSON: {e})") from None
    a = parse_har(data, path)
    return Archive(source=a.source, page_url=a.page_url, entries=a.entries, recorded=a.recorded,
                   digest=hashlib.sha256(raw).hexdigest())


def read_archive(path: str | Path) -> Archive:
    """Read and check a HAR file (cached by path, size and modification time)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        raise QuicbenchError(f"HAR file '{p}' not found") from None
    if not p.is_file():
        raise QuicbenchError(f"HAR file '{p}' is not a regular file")
    if st.st_size > MAX_HAR_BYTES:
        raise QuicbenchError(f"{p}: a HAR file is at most {MAX_HAR_BYTES >> 20} MB")
    return _read_cached(str(p.resolve()), st.st_mtime_ns, st.st_size)


def check_compatible(archives: list[Archive]) -> None:
    """Archives served together must not record the same request with different responses
    (the replay server could serve only one of them)."""
    seen: dict[tuple, tuple[Archive, Entry]] = {}
    for a in archives:
        for e in a.entries:
            prev = seen.get(e.request_key)
            if prev is not None and (prev[1].status != e.status or prev[1].body != e.body):
                raise QuicbenchError(f"{a.source}: {_entry_name(e.index, e.url)} is also in {prev[0].source} "
                                     f"(entry {prev[1].index}) with a different response; archives of one plan "
                                     f"are served together and can serve only one")
            seen.setdefault(e.request_key, (a, e))
