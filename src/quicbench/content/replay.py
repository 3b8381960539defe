"""A page archive (model/har.py) laid out in a content set for the replay server: ``replay/<key>/``
holds ``index.json`` (every entry: method, host, port, path, query, status, headers, body file)
and one file per distinct body, which ``qb-replay`` loads (loadclient/internal/replay)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from quicbench.model.har import Archive


def archive_key(archive: Archive) -> str:
    return archive.digest[:16]


def write_replay(archive: Archive, directory: Path) -> list[dict[str, Any]]:
    """Lay the archive out for qb-replay: directory/index.json and directory/bodies/<sha256>.
    Returns the content manifest's entry of index.json."""
    (directory / "bodies").mkdir(parents=True, exist_ok=True)
    files = []
    for e in archive.entries:
        p = directory / "bodies" / e.body_sha256
        if not p.exists():
            p.write_bytes(e.body)
    index = {
        "format": "quicbench-replay/1",
        "source": os.path.basename(archive.source),
        "page": archive.page_url,
        "recorded": archive.recorded,
        "entries": [{"entry": e.index, "method": e.method, "host": e.host, "port": e.port, "path": e.path,
                     "query": e.query, "status": e.status, "headers": [list(h) for h in e.headers],
                     "body": f"bodies/{e.body_sha256}", "size": len(e.body)} for e in archive.entries],
    }
    (directory / "index.json").write_text(json.dumps(index, indent=1))
    files.append({"path": f"replay/{directory.name}/index.json", "size": (directory / "index.json").stat().st_size})
    return files
