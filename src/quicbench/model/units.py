"""Size strings and rates: '10KB', '33.6MB', '1MiB', '512' (bytes)."""

from __future__ import annotations

import re

from quicbench.errors import QuicbenchError

_UNITS = {"": 1, "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3,
          "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Bytes in a size string. KB/MB/GB are decimal (as 33.6 MB in CVart), KiB/MiB/GiB binary."""
    if isinstance(text, int):
        if text < 1:
            raise QuicbenchError(f"bad size {text}: must be at least 1 byte")
        return text
    m = _SIZE_RE.match(str(text))
    unit = m.group(2).upper() if m else None
    if not m or unit not in _UNITS:
        raise QuicbenchError(
            f"bad size '{text}': use a number with B, KB, MB, GB (decimal) or KiB, MiB, GiB (binary), e.g. 100KB")
    n = round(float(m.group(1)) * _UNITS[unit])
    if n < 1:
        raise QuicbenchError(f"bad size '{text}': must be at least 1 byte")
    return n


def size_label(n: int) -> str:
    """The shortest decimal label that parses back to n: 100000 -> '100KB', 33600000 -> '33.6MB'."""
    for unit, mult in (("GB", 1000**3), ("MB", 1000**2), ("KB", 1000)):
        if n >= mult:
            v = n / mult
            text = f"{v:.6g}"
            if round(float(text) * mult) == n:
                return f"{text}{unit}"
    return f"{n}B"
