"""The ssh backend's inventory: bad input is one line naming the file and the field."""

import pytest

from quicbench.errors import QuicbenchError
from quicbench.lab.inventory import load_inventory

GOOD = """
[ssh]
user = "qb"
[client]
host = "10.0.0.1"
iface = "eth1"
address = "198.18.0.1/24"
[router]
host = "10.0.0.2"
if_client = "eth1"
if_server = "eth2"
ip_client = "198.18.0.2/24"
ip_server = "198.18.1.1/24"
[server]
host = "10.0.0.3"
iface = "eth1"
address = "198.18.1.2/24"
port = 2222
"""


def test_good_inventory_and_defaults(tmp_path):
    p = tmp_path / "hosts.toml"
    p.write_text(GOOD)
    inv = load_inventory(p)
    assert inv.setting("client", "user") == "qb" and inv.setting("server", "port") == 2222
    assert inv.setting("router", "port") == 22 and inv.setting("router", "workdir") == "/var/tmp/quicbench"
    assert inv.router2 is None


@pytest.mark.parametrize("change, needle", [
    (("[server]", "[server]\ncolour = 1"), "server.colour: unknown key, accepted: "),
    (("[ssh]", "[ssh]\nworkdir = \"tmp/x\""), "ssh.workdir"),
    (("[ssh]", "[ssh]\nworkdir = \"/tmp\""), "ssh.workdir"),
    (('address = "198.18.0.1/24"', 'address = "198.18.0.1"'), "client.address"),
    (('address = "198.18.0.1/24"', 'address = "nowhere/24"'), "client.address"),
    (('if_server = "eth2"', 'if_server = "a very long interface name"'), "router.if_server"),
    (('ip_server = "198.18.1.1/24"\n', ''), "router.ip_server"),
    (("port = 2222", "port = 70000"), "server.port"),
    (("[ssh]", "[ssh]\nkey = \"/nonexistent/key\""), "client.key"),
])
def test_bad_inventory_names_the_field(tmp_path, change, needle):
    p = tmp_path / "hosts.toml"
    p.write_text(GOOD.replace(*change, 1))
    with pytest.raises(QuicbenchError) as e:
        load_inventory(p)
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert str(p) in str(e.value)
