"""The Caddy that make setup builds is the one the driver names."""

import re

from conftest import REPO
from quicbench.servers.caddy import CADDY_VERSION


def test_makefile_builds_the_drivers_caddy_version():
    m = re.search(r"^CADDY_VERSION := (\S+)$", (REPO / "Makefile").read_text(), re.M)
    assert m and m.group(1) == CADDY_VERSION
