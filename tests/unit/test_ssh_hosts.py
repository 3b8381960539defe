"""The `ssh` backend's pure decisions: which link the router hosts can apply the plan's conditions
with, what the plan asks of the server host, whether a host's Debian package or Python stands for
the controller's, and what a binary is (tests/integration/test_ssh_backend.py runs them on hosts)."""

from __future__ import annotations

import pytest

from quicbench.errors import QuicbenchError
from quicbench.lab.ssh import RouterAbility, choose_link
from quicbench.lab.ssh_hosts import BinaryFacts, measurement_problem, package_problem, python_problem
from quicbench.model.conditions import Condition

WHERE = "host router (root@10.0.0.12:22)"
FIELD = "inventory hosts.toml: router.bin_dir"
CLEAN = Condition.model_validate({"name": "d10", "delay_ms": 10})
CODEL = Condition.model_validate({"name": "aqm", "delay_ms": 10, "rate_mbit": 10, "queue_discipline": "codel"})


def router(netem: bool, linkem: bool) -> dict[str, RouterAbility]:
    return {"router": RouterAbility(WHERE, FIELD, netem, linkem)}


def test_auto_takes_netem_where_the_router_has_it_and_it_implements_the_conditions():
    assert choose_link("auto", [CLEAN], False, router(netem=True, linkem=True)) == ("netem", {})


def test_auto_takes_linkem_for_what_netem_lacks_and_says_why():
    name, passed = choose_link("auto", [CLEAN, CODEL], False, router(netem=True, linkem=True))
    assert name == "linkem" and "queue_discipline 'codel'" in passed["netem"]
    name, passed = choose_link("auto", [CLEAN], False, router(netem=False, linkem=True))
    assert name == "linkem" and WHERE in passed["netem"] and "sch_netem" in passed["netem"]


def test_codel_on_a_router_with_netem_and_no_linkem_is_refused_naming_host_and_fields():
    with pytest.raises(QuicbenchError) as e:
        choose_link("auto", [CLEAN, CODEL], False, router(netem=True, linkem=False))
    msg = str(e.value)
    assert msg.startswith(FIELD) and WHERE in msg and "'aqm'" in msg and "queue_discipline" in msg
    assert "--provision" in msg


def test_an_impairing_condition_on_a_router_without_netem_or_linkem_is_refused():
    with pytest.raises(QuicbenchError, match="sch_netem"):
        choose_link("auto", [CLEAN], False, router(netem=False, linkem=False))


def test_a_clean_path_needs_no_emulator():
    name, passed = choose_link("auto", [Condition()], False, router(netem=False, linkem=False))
    assert name == "plain" and set(passed) == {"netem", "linkem"}


def test_named_links_the_routers_cannot_run_are_refused():
    with pytest.raises(QuicbenchError, match="no sch_netem"):
        choose_link("netem", [CLEAN], False, router(netem=False, linkem=True))
    with pytest.raises(QuicbenchError, match="queue_discipline 'codel'"):
        choose_link("netem", [CODEL], False, router(netem=True, linkem=True))
    with pytest.raises(QuicbenchError) as e:
        choose_link("linkem", [CLEAN], False, router(netem=True, linkem=False))
    assert str(e.value).startswith(FIELD)
    assert choose_link("linkem", [CODEL], False, router(netem=False, linkem=True)) == ("linkem", {})


def test_what_the_plan_asks_of_the_server_host():
    writes = {"quinn": {"qlog": True, "reports_cc": True}}
    silent = {"caddy-2.6": {"qlog": False, "reports_cc": False}}
    assert measurement_problem(True, True, writes) is None
    assert measurement_problem(False, False, silent) is None
    field, why = measurement_problem(True, False, {**writes, **silent})
    assert field == "qlog" and "caddy-2.6" in why
    field, why = measurement_problem(False, True, {"caddy": {"qlog": True, "reports_cc": False}})
    assert field == "verify_cc" and "caddy" in why


def test_a_hosts_debian_package_stands_for_the_controllers_only_at_its_version():
    assert package_problem("ngtcp2-server", "1.11.0-1~bpo12+1", "1.11.0-1~bpo12+1") is None
    assert package_problem("ngtcp2-server", None, "0.12.1-1") is None          # the controller has none
    why = package_problem("ngtcp2-server", "1.11.0-1~bpo12+1", "0.12.1-1")
    assert "0.12.1-1" in why and "ngtcp2-server=1.11.0-1~bpo12+1" in why and "--provision" in why


def test_a_hosts_python_stands_for_the_controllers_with_the_same_packages():
    want = {"aioquic": "1.2.0", "pylsqpack": "0.3.18"}
    assert python_problem("aioquic=1.2.0 pylsqpack=0.3.18", want) == (None, want)
    why, there = python_problem("aioquic=1.1.0 pylsqpack=0.3.18", want)
    assert "aioquic 1.1.0 (this controller: 1.2.0)" in why and there["aioquic"] == "1.1.0"
    why, _ = python_problem("ModuleNotFoundError: No module named 'quicbench'", want)
    assert "No module named 'quicbench'" in why


def test_what_a_binary_is():
    bins = BinaryFacts({"quicbench-netty.jar": {"package": None, "root": False, "version_args": [], "own": True},
                        "gtlsserver": {"package": "ngtcp2-server", "root": True, "version_args": ["--help"],
                                       "own": False, "release": "bookworm-backports"},
                        "python3": {"package": None, "root": True, "version_args": [], "own": False,
                                    "python": {"aioquic": "1.2.0"}}})
    # a jar prints no version: it is compared by its digest, never run
    assert bins.version_cmd("quicbench-netty.jar") is None and bins.own("quicbench-netty.jar")
    assert bins.version_cmd("gtlsserver") == "--help" and bins.version_cmd("tc") == "-V"
    assert bins.driver_package("gtlsserver") == "ngtcp2-server" and bins.release("gtlsserver") == "bookworm-backports"
    assert bins.driver_package("tc") is None and bins.package("tc") == "iproute2"     # the lab's own tools
    assert bins.python_packages("python3") == {"aioquic": "1.2.0"} and bins.driver_package("python3") is None
    assert bins.needs_root("gtlsserver") and bins.needs_root("tc") and not bins.needs_root("quicbench-netty.jar")


def test_the_local_paths_an_argument_or_config_names():
    from quicbench.lab.ssh_transport import path_refs
    roots = ["/var/lib/qb/runs/r1", "/root/.cache/quicbench"]
    arg = '{"ca": "/var/lib/qb/runs/r1/tls/ca.pem", "paths": ["/obj/1"], "qlog_dir": "/var/lib/qb/runs/r1/t/qlog/"}'
    assert path_refs(arg, roots) == ["/var/lib/qb/runs/r1/tls/ca.pem", "/var/lib/qb/runs/r1/t/qlog"]
    assert path_refs("root /root/.cache/quicbench/c/x;", roots) == ["/root/.cache/quicbench/c/x"]
    assert path_refs("/var/lib/qb/runs/r10/x", roots) == []        # another directory, not under a root
    assert path_refs('{"paths": ["/obj/1"]}', roots) == []


def test_a_router_with_neither_emulator_names_the_condition_netem_lacks_and_why():
    with pytest.raises(QuicbenchError) as e:
        choose_link("auto", [CODEL], False, router(netem=False, linkem=False))
    msg = str(e.value)
    assert "'aqm'" in msg and "sch_netem" in msg and "queue_discipline 'codel'" in msg
