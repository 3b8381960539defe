"""A realistic page (DNCS-HTTP3's ~10 MB, 125-request page): placeholder until the browser issue.

make_realistic_page(directory, seed) writes index.html and its resources and returns their
manifest entries ({"path", "size", "sha256"}, paths relative to the content root).
"""

from __future__ import annotations

from pathlib import Path


def make_realistic_page(directory: Path, seed: int) -> list[dict]:
    raise NotImplementedError("the realistic page generator comes with the browser client")
