"""The result store: one directory per run.

runs/<run-id>/meta.json      the plan, versions, host, lab and link: the data describes itself
runs/<run-id>/trials.jsonl   one row per finished trial (ok or failed), appended and fsynced
runs/<run-id>/trials/<n>/    per-trial files: requests.jsonl, client.log, summary.json
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from quicbench.errors import QuicbenchError


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class RunStore:
    def __init__(self, directory: Path):
        self.dir = Path(directory)

    @classmethod
    def create(cls, out: Path, run_id: str | None = None) -> "RunStore":
        d = Path(out) / (run_id or new_run_id())
        d.mkdir(parents=True, exist_ok=False)
        return cls(d)

    @classmethod
    def open(cls, directory: Path) -> "RunStore":
        d = Path(directory)
        if not (d / "meta.json").exists():
            raise QuicbenchError(f"'{d}' is not a quicbench run directory (no meta.json)")
        return cls(d)

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def trials_path(self) -> Path:
        return self.dir / "trials.jsonl"

    # -- meta ------------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any]:
        p = self.dir / "meta.json"
        return json.loads(p.read_text()) if p.exists() else {}

    def write_meta(self, meta: dict[str, Any]) -> None:
        tmp = self.dir / "meta.json.tmp"
        tmp.write_text(json.dumps(meta, indent=2, default=str))
        os.replace(tmp, self.dir / "meta.json")

    def update_meta(self, **fields: Any) -> None:
        self.write_meta({**self.read_meta(), **fields})

    # -- trials ----------------------------------------------------------------------
    def append(self, row: dict[str, Any]) -> None:
        """Append one row atomically: a single write of one line, then fsync."""
        line = (json.dumps(row, default=str, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.trials_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def rows(self) -> list[dict[str, Any]]:
        """All complete rows; a torn last line (killed mid-write) is ignored."""
        if not self.trials_path.exists():
            return []
        out = []
        for line in self.trials_path.read_bytes().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def trial_dir(self, seq: int) -> Path:
        return self.dir / "trials" / f"{seq:05d}"
