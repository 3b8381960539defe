"""DNCS-HTTP3's connection phases, measured the way they measured them: one httpstat-style fetch.

DNCS (seed 004) ran `httpstat https://web.doricats.dev:<port>` from their client against each
of their three servers. httpstat is a wrapper of curl: it fetches one URL on a new connection
and splits the time with curl's timers into DNS lookup, TCP connection, TLS handshake, server
processing and content transfer. Their URL was the page's HTML (84,200 bytes), so the phases
are that one fetch's, not the browser's page load's.

After each page load the browser client does the same with qb-load: one GET of the page's HTML
on a new connection, over the trial's protocol, every byte checked against the manifest. Its
per-request timestamps give httpstat's phases:

  TCP connection     connect start → connect done   (curl: time_connect − time_namelookup)
  TLS handshake      connect done → TLS done        (time_pretransfer − time_connect)
  server processing  TLS done → first byte          (time_starttransfer − time_pretransfer)
  content transfer   first byte → last byte         (time_total − time_starttransfer)

QUIC merges the transport's and TLS's handshakes into one: its connect phase is the whole
handshake and its TLS phase is empty (qb-load reports connect done = TLS done). The lab has no
DNS (the client dials the server's address), so there is no lookup phase. DNCS's curl (Ubuntu
18.04) had no HTTP/3: their httpstat output for the HTTP/3 server reads "HTTP/2 200", so the
phases they show for it are HTTP/2's over TCP; here every protocol's are its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from quicbench.clients.base import Target, run_measured
from quicbench.clients.loadclient import LoadClient
from quicbench.store import read_jsonl

REQUESTS_FILE = "httpstat.jsonl"      # qb-load's per-request line of the fetch
SUMMARY_FILE = "httpstat.json"        # qb-load's summary
LOG_FILE = "httpstat.log"
COLUMNS = ("httpstat_connect_ms", "httpstat_tls_ms", "httpstat_server_ms", "httpstat_transfer_ms",
           "httpstat_total_ms", "httpstat_protocol")
DEADLINE_S = 30.0                     # one small fetch: its own deadline, whatever the trial's


def _ms(a: int | None, b: int | None) -> float | None:
    return round((b - a) / 1e6, 3) if a is not None and b is not None else None


def phases(rec: dict[str, Any]) -> dict[str, Any]:
    """httpstat's phases of one qb-load request on a new connection (ms; None when a timestamp is
    missing). QUIC (connect done = TLS done): connect is the handshake, TLS None."""
    connect0, connect1, tls1 = rec.get("connect_start_ns"), rec.get("connect_done_ns"), rec.get("tls_done_ns")
    first, last, start = rec.get("first_byte_ns"), rec.get("last_byte_ns"), rec.get("start_ns")
    quic = rec.get("proto") == "h3" or (connect1 is not None and connect1 == tls1)
    ready = tls1 if tls1 is not None else connect1
    if ready is not None and start is not None:
        ready = max(ready, start)
    return {"httpstat_connect_ms": _ms(connect0, tls1 if quic else connect1),
            "httpstat_tls_ms": None if quic else _ms(connect1, tls1),
            "httpstat_server_ms": _ms(ready, first),
            "httpstat_transfer_ms": _ms(first, last),
            "httpstat_total_ms": _ms(start if start is not None else connect0, last),
            "httpstat_protocol": rec.get("proto")}


def fetch_phases(target: Target, protocol: str, path: str, trial_dir: Path,
                 timeout_s: float = DEADLINE_S) -> tuple[dict[str, Any], str | None]:
    """Fetch `path` once on a new connection over `protocol` from the client node (qb-load) and
    return (httpstat's phases as row columns, error or None). Files: httpstat.jsonl, .json, .log."""
    empty: dict[str, Any] = dict.fromkeys(COLUMNS)
    try:
        argv = LoadClient.fetch_argv(target, protocol, path, trial_dir / REQUESTS_FILE, timeout_s,
                                     connections="per-object")
    except Exception as e:  # noqa: BLE001 - qb-load missing: the trial says so
        return empty, f"httpstat fetch of {path}: {e}"
    for name in (REQUESTS_FILE, SUMMARY_FILE):
        (trial_dir / name).unlink(missing_ok=True)
    with open(trial_dir / SUMMARY_FILE, "wb") as out, open(trial_dir / LOG_FILE, "wb") as log:
        returncode, _, _, killed = run_measured(target.lab.cmd("client", argv), timeout_s + 10, stdout=out,
                                                stderr=log)
    recs = read_jsonl(trial_dir / REQUESTS_FILE)
    if returncode != 0 or len(recs) != 1 or recs[0].get("error"):
        try:
            errs = json.loads((trial_dir / SUMMARY_FILE).read_text() or "{}").get("errors") or []
        except json.JSONDecodeError:
            errs = []
        tail = (trial_dir / LOG_FILE).read_text(errors="replace").strip().splitlines()[-1:]
        why = (errs[0].get("error") if errs else None) or (recs[0].get("error") if recs else None) \
            or ("killed after the deadline" if killed else f"qb-load exit code {returncode}"
                + (f": {tail[0]}" if tail else ""))
        return empty, f"httpstat fetch of {path} over {protocol} failed: {why}"
    return phases(recs[0]), None
