#!/usr/bin/env python3
"""qb-curl: fetch URLs over one forced protocol with libcurl (curl_cffi: BoringSSL, nghttp2, ngtcp2 +
nghttp3), writing one JSON line per request in qb-load's format. A second HTTP/1.1/2/3 client stack
for quicbench's `command` client driver (docs/endpoints.md).

    curl_get.py --proto h3 --connect 198.18.1.2:443 --ca ca.pem --parallel 10 \
                --requests requests.jsonl https://www.quicbench.test/100KB/obj-1.bin ...

The protocol is forced: h1 = HTTP/1.1 over TLS, h2 = HTTP/2 over TLS (ALPN h2 only), h3 = HTTP/3
over QUIC only (CURL_HTTP_VERSION_3ONLY: no fallback to TCP). Every request's negotiated version is
read back (CURLINFO_HTTP_VERSION) and a different one fails the request. All requests share one
libcurl multi handle: h2/h3 requests are multiplexed on one connection (PIPEWAIT), h1 requests use
up to --parallel connections. No TLS session cache is kept across processes, so every run does full
handshakes. Bodies are counted, not stored (and hashed with sha256 when --manifest is given).

Exit codes: 0 every request ok; 1 a request failed; 2 usage error (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import resource
import sys
import time
from urllib.parse import urlsplit

VERSIONS = {"h1": "V1_1", "h2": "V2TLS", "h3": "V3ONLY"}
# CURLINFO_HTTP_VERSION values: CURL_HTTP_VERSION_1_0 = 1, 1_1 = 2, 2_0 = 3, 3 = 30
NEGOTIATED = {1: "h1", 2: "h1", 3: "h2", 30: "h3"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="curl_get.py", description="Fetch URLs over one forced protocol (libcurl).")
    p.add_argument("--proto", choices=sorted(VERSIONS))
    p.add_argument("--connect", help="ADDRESS:PORT every connection goes to (the URLs' port; curl --resolve)")
    p.add_argument("--ca", help="PEM CA file, the only trusted CA")
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--requests", help="write one JSON line per request here")
    p.add_argument("--manifest", help="content manifest: check every body's size and sha256")
    p.add_argument("--timeout", type=float, default=60.0, help="overall deadline, seconds")
    p.add_argument("--version", action="store_true")
    p.add_argument("urls", nargs="*")
    a = p.parse_args(argv)
    if not a.version and (not a.urls or not a.proto):
        p.error("give --proto and at least one URL")
    if a.parallel < 1:
        p.error("--parallel must be at least 1")
    return a


def versions() -> dict[str, str]:
    import curl_cffi
    from curl_cffi import Curl
    return {"curl_cffi": curl_cffi.__version__, "libcurl": Curl().version().decode()}


async def fetch_all(a: argparse.Namespace, manifest: dict[str, dict]) -> list[dict]:
    from curl_cffi import Curl, CurlHttpVersion, CurlInfo, CurlOpt
    from curl_cffi.aio import AsyncCurl

    acurl = AsyncCurl()
    sem = asyncio.Semaphore(a.parallel)
    conn_ids: dict[int, int] = {}     # libcurl's connection id -> 1, 2, ... in order of first use
    records: list[dict] = []

    async def one(i: int, url: str) -> None:
        async with sem:
            c = Curl()
            h = hashlib.sha256() if manifest else None
            got = {"bytes": 0, "first_ns": None, "cid": None}

            def body(chunk: bytes) -> int:
                if got["first_ns"] is None:
                    got["first_ns"] = time.time_ns()
                    # the connection id, read while the transfer holds its connection (after it
                    # ends libcurl may already have detached it)
                    got["cid"] = c.getinfo(CurlInfo.CONN_ID)
                got["bytes"] += len(chunk)
                if h is not None:
                    h.update(chunk)
                return len(chunk)

            parts = urlsplit(url)
            c.setopt(CurlOpt.URL, url.encode())
            c.setopt(CurlOpt.HTTP_VERSION, getattr(CurlHttpVersion, VERSIONS[a.proto]))
            c.setopt(CurlOpt.WRITEFUNCTION, body)
            c.setopt(CurlOpt.PIPEWAIT, 1)          # wait for a multiplexed connection instead of opening more
            c.setopt(CurlOpt.TIMEOUT_MS, int(a.timeout * 1000))
            if a.connect:
                # curl --resolve: the URL's host name (SNI, :authority, certificate) maps to this address
                c.setopt(CurlOpt.RESOLVE, [f"{parts.hostname}:{a.connect_port}:{a.connect_host}".encode()])
            if a.ca:
                c.setopt(CurlOpt.CAINFO, a.ca.encode())
            rec: dict = {"i": i, "path": parts.path, "start_ns": time.time_ns(), "connect_start_ns": None,
                         "connect_done_ns": None, "tls_done_ns": None, "first_byte_ns": None, "last_byte_ns": None,
                         "bytes": 0, "status": None, "proto": None, "conn_id": None, "conn_reused": None,
                         "sha256_ok": None, "error": None}
            try:
                await acurl.add_handle(c)
            except Exception as e:  # noqa: BLE001 - a failed request is recorded, never raised
                rec["error"] = str(e).splitlines()[0][:300]
            end = time.time_ns()
            rec["bytes"] = got["bytes"]
            rec["status"] = c.getinfo(CurlInfo.RESPONSE_CODE) or None
            rec["proto"] = NEGOTIATED.get(c.getinfo(CurlInfo.HTTP_VERSION))
            cid = got["cid"]
            if rec["error"] is None:
                rec["last_byte_ns"] = end
                first = c.getinfo(CurlInfo.STARTTRANSFER_TIME_T)    # microseconds after start
                rec["first_byte_ns"] = rec["start_ns"] + first * 1000 if first else got["first_ns"]
                if cid is not None and cid >= 0:
                    conn_ids.setdefault(cid, len(conn_ids) + 1)
                    rec["conn_id"] = conn_ids[cid]
                # the transfer that opened its connection carries the connection's phases
                rec["conn_reused"] = not c.getinfo(CurlInfo.NUM_CONNECTS)
                if not rec["conn_reused"]:
                    # phases of the connection this request opened (microseconds after its start)
                    dns = c.getinfo(CurlInfo.NAMELOOKUP_TIME_T)
                    tcp = c.getinfo(CurlInfo.CONNECT_TIME_T)
                    tls = c.getinfo(CurlInfo.APPCONNECT_TIME_T)
                    rec["connect_start_ns"] = rec["start_ns"] + dns * 1000
                    # QUIC merges transport and TLS handshakes: both end when the handshake does
                    rec["connect_done_ns"] = rec["start_ns"] + (tls if a.proto == "h3" else tcp) * 1000
                    rec["tls_done_ns"] = rec["start_ns"] + tls * 1000
                if rec["proto"] != a.proto:
                    rec["error"] = f"protocol mismatch: requested {a.proto}, got {rec['proto']}"
                elif rec["status"] != 200:
                    rec["error"] = f"status {rec['status']}"
                elif manifest:
                    entry = manifest.get(parts.path.lstrip("/"))
                    rec["sha256_ok"] = bool(entry and entry["sha256"] == h.hexdigest() and
                                            entry["size"] == got["bytes"])
                    if not rec["sha256_ok"]:
                        rec["error"] = "manifest: no entry, size or sha256 mismatch"
            c.close()
            records.append(rec)

    try:
        await asyncio.gather(*(one(i, u) for i, u in enumerate(a.urls, 1)))
    finally:
        await acurl.close()
    return sorted(records, key=lambda r: r["i"])


def main(argv: list[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.version:
        print(json.dumps(versions()))
        return 0
    if a.connect:
        host, _, port = a.connect.rpartition(":")
        if not host or not port.isdigit():
            print(f"--connect '{a.connect}': use ADDRESS:PORT", file=sys.stderr)
            return 2
        a.connect_host, a.connect_port = host, int(port)
    manifest = {}
    if a.manifest:
        manifest = {f["path"]: f for f in json.load(open(a.manifest))["files"]}
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    records = asyncio.run(fetch_all(a, manifest))
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    if a.requests:
        with open(a.requests, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
    failed = [r for r in records if r["error"]]
    starts = [r["start_ns"] for r in records]
    ends = [r["last_byte_ns"] for r in records if r["last_byte_ns"]]
    summary = {"proto_requested": a.proto, "requests": len(records), "ok": len(records) - len(failed),
               "failed": len(failed), "bytes": sum(r["bytes"] for r in records),
               "start_ns": min(starts), "end_ns": max(ends) if ends else None,
               "connections": len({r["conn_id"] for r in records if r["conn_id"] is not None}),
               "errors": [{"i": r["i"], "error": r["error"]} for r in failed[:20]],
               # CPU of the transfer phase (interpreter start-up excluded), as qb-load reports it
               "cpu_user_s": ru1.ru_utime - ru0.ru_utime, "cpu_sys_s": ru1.ru_stime - ru0.ru_stime,
               "versions": versions()}
    print(json.dumps(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
