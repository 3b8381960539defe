"""`quicbench page`: page archives (HAR 1.2 with bodies) to replay: generate a corpus page, record
a real page in Chromium, check an archive. docs/pages.md."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import List, Optional

import typer

from quicbench.cli.app import app, console as out
from quicbench.errors import QuicbenchError

page_app = typer.Typer(no_args_is_help=True, help="Page archives (HAR) for replayed page loads.")
app.add_typer(page_app, name="page")


def _summary(path: Path) -> str:
    from quicbench.model.har import read_archive
    a = read_archive(path)
    return (f"{path}: {len(a.entries)} requests ({a.recorded} entries), {len(a.origins)} origins, "
            f"{a.body_bytes:,} body bytes; page {a.page_url}")


def _write(path: Path, har: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(har, indent=1) + "\n")
    os.replace(tmp, path)


@page_app.command("generate")
def page_generate(shape: List[str] = typer.Option(["p50"], "--shape", help="p10, p50 or p90 (repeatable)."),
                  seed: List[int] = typer.Option([1], "--seed", help="Seed (repeatable): one page per shape and seed."),
                  scale: float = typer.Option(1.0, "--scale", help="Multiplies the bytes only (0 < scale <= 10)."),
                  out_dir: Path = typer.Option(Path("."), "--out", help="Directory for <shape>-s<seed>.har.")) -> None:
    """Generate pages shaped like the HTTP Archive's (requests, bytes by type, origins, depth)."""
    from quicbench.content.pagegen import SHAPES, generate_page
    bad = [s for s in shape if s not in SHAPES]
    if bad:
        raise QuicbenchError(f"--shape {bad[0]!r}; accepted: {', '.join(SHAPES)}")
    if not 0 < scale <= 10:
        raise QuicbenchError(f"--scale {scale}: accepted 0 < scale <= 10")
    for sh in shape:
        for s in seed:
            path = out_dir / f"{sh}-s{s}.har"
            _write(path, generate_page(sh, s, scale))
            out.print(_summary(path), highlight=False)


@page_app.command("check")
def page_check(har: Path = typer.Argument(..., help="HAR file.")) -> None:
    """Check that a HAR can be replayed (exit 2 naming the entry and why when not)."""
    out.print(_summary(har), highlight=False)


@page_app.command("record")
def page_record(url: str = typer.Argument(..., help="The page to record (https://...)."),
                output: Path = typer.Option(..., "--out", help="The HAR file to write."),
                resolve: List[str] = typer.Option([], "--resolve", help="HOST=ADDRESS: resolve HOST to ADDRESS "
                                                  "(repeatable); with any, every other name fails to resolve."),
                spki: Optional[str] = typer.Option(None, "--spki", help="Trust this server key (base64 SHA-256 "
                                                   "of its SPKI) besides the system's CAs."),
                wait_s: float = typer.Option(2.0, "--wait", help="Seconds to keep recording after the load event."),
                timeout_s: float = typer.Option(60.0, "--timeout", help="Seconds the load may take.")) -> None:
    """Load URL once in Chromium and save it as a HAR with bodies, ready to replay."""
    from quicbench.clients.browser.driver import BrowserClient
    if not url.startswith("https://"):
        raise QuicbenchError(f"URL {url!r}: accepted https:// URLs (a replay serves https origins only)")
    rules = []
    for r in resolve:
        host, sep, addr = r.partition("=")
        if not sep or not host or not addr:
            raise QuicbenchError(f"--resolve {r!r}: accepted HOST=ADDRESS")
        rules.append(f"MAP {host} {addr}")
    from quicbench.provision import ensure_available
    ok, why = ensure_available(BrowserClient)       # Chromium and Playwright, on first use
    if not ok:
        raise QuicbenchError(why)
    exe = BrowserClient.executable()
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-extensions", "--password-store=basic"]
    if rules:
        flags.append("--host-resolver-rules=" + ", ".join([*rules, "MAP * ~NOTFOUND"]))
    if spki:
        flags.append(f"--ignore-certificate-errors-spki-list={spki}")
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    with tempfile.TemporaryDirectory(prefix="qb-record-") as profile:
        with sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(
                profile, executable_path=exe, headless=True, args=flags, record_har_path=str(tmp),
                record_har_content="embed", record_har_mode="full", service_workers="block",
                viewport={"width": 1366, "height": 768}, timeout=60_000)
            try:
                page = ctx.pages[0] if ctx.pages else ctx.new_page()
                try:
                    page.goto(url, wait_until="load", timeout=timeout_s * 1000)
                    page.wait_for_timeout(wait_s * 1000)
                except PlaywrightError as e:
                    raise QuicbenchError(f"page record: loading {url} failed: {str(e).splitlines()[0]}") from None
            finally:
                ctx.close()                      # writes the HAR
    try:
        # requests that got no response when recorded (blocked, cancelled) cannot be replayed:
        # they are left out, and said
        har = json.loads(tmp.read_text())
        entries = har.get("log", {}).get("entries", [])
        kept = [e for e in entries if isinstance(e.get("response", {}).get("status"), int)
                and 100 <= e["response"]["status"] <= 599]
        har["log"]["entries"] = kept
        _write(output, har)
    finally:
        tmp.unlink(missing_ok=True)
    for e in [e for e in entries if e not in kept][:5]:
        out.print(f"left out (no response when recorded): {e.get('request', {}).get('url')}", highlight=False)
    try:
        out.print(_summary(output), highlight=False)
    except QuicbenchError as e:
        raise QuicbenchError(f"{e} (the recording is kept in {output}: edit or re-record it)") from None
