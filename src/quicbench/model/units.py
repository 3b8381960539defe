"""Size strings and rates: '10KB', '33.6MB', '1MiB', '512' (bytes)."""

from __future__ import annotations

import re

from quicbench.errors import QuicbenchError

_UNITS = {"": 1, "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3,
          "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}
_SIZE_RE = re.compile(r"[ \t]*([0-9]+(?:\.[0-9]+)?)[ \t]*([A-Za-z]*)[ \t]*", re.ASCII)
MAX_SIZE = 10 * 1000**3    # an object's size at most (10GB): each is generated and kept in the cache


def parse_size(text: str | int) -> int:
    """Bytes in a size string. KB/MB/GB are decimal (as 33.6 MB in CVart), KiB/MiB/GiB binary."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise QuicbenchError(f"bad size {text!r}: a string such as '100KB' or a number of bytes")
    if isinstance(text, int):
        if not 1 <= text <= MAX_SIZE:
            raise QuicbenchError(f"bad size {text}: must be 1 byte to {size_label(MAX_SIZE)}")
        return text
    m = _SIZE_RE.fullmatch(text)
    unit = m.group(2).upper() if m else None
    if not m or unit not in _UNITS:
        raise QuicbenchError(
            f"bad size {text!r}: use a number with B, KB, MB, GB (decimal) or KiB, MiB, GiB (binary), e.g. 100KB")
    n = round(float(m.group(1)) * _UNITS[unit])
    if not 1 <= n <= MAX_SIZE:
        raise QuicbenchError(f"bad size {text!r}: must be 1 byte to {size_label(MAX_SIZE)}")
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


def go_duration(seconds: float) -> str:
    """A Go duration string for a number of seconds, never in exponent notation (1e6 -> '1000000s')."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
