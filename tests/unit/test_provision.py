"""First use: a plan's missing stack, browser or tool is provided by its Makefile target with one
progress line, or refused in one line with the fix (exit 2)."""

import re

import pytest

import quicbench.provision as provision
from quicbench.clients import CLIENTS
from quicbench.errors import QuicbenchError
from quicbench.kernels import KERNELS
from quicbench.paths import REPO_ROOT
from quicbench.servers import SERVERS


def makefile_targets() -> set[str]:
    text = (REPO_ROOT / "Makefile").read_text()
    return {m.group(1) for m in re.finditer(r"^([A-Za-z0-9_.-]+):", text, re.M)}


def test_every_provision_is_a_makefile_target_and_every_driver_names_known_ones():
    assert set(provision.PROVISIONS) <= makefile_targets()
    drivers = [*(SERVERS.get(n) for n in SERVERS.names()), *(CLIENTS.get(n) for n in CLIENTS.names()),
               *(KERNELS.get(n) for n in KERNELS.names())]
    named = {p for d in drivers for p in getattr(d, "provisions", ())}
    assert named <= set(provision.PROVISIONS), named - set(provision.PROVISIONS)
    assert {"servers", "browser", "ngtcp2", "quinn", "uml"} <= named


def test_make_setup_builds_only_the_default_plans_needs():
    text = (REPO_ROOT / "Makefile").read_text()
    setup = re.search(r"^setup: (.*)\n\t(.*)$", text, re.M)
    assert setup.group(1).split() == ["deps"]         # the core Debian packages first
    recipe = setup.group(2)                            # then the venv beside the three builds
    assert "venv" in recipe.split() and set(re.findall(r"\$\(BIN\)/(\S+)", recipe)) == {"qb-load", "linkem", "caddy"}
    build = re.search(r"^build:\n\t(.*)$", text, re.M).group(1)
    assert set(re.findall(r"\$\(BIN\)/(\S+)", build)) == {"qb-load", "linkem", "caddy"}
    assert re.search(r"^test: setup-all ", text, re.M)


def test_unknown_and_refused_provisions_are_one_line(monkeypatch):
    with pytest.raises(QuicbenchError, match=r"unknown 'nope', accepted: servers, capture"):
        provision.ensure("nope")
    monkeypatch.setenv(provision.NO_INSTALL_ENV, "1")
    with pytest.raises(QuicbenchError, match=r"QB_NO_INSTALL=1\): run 'make browser' in "):
        provision.ensure("browser")


def fake_repo(tmp_path, monkeypatch, recipe: str):
    (tmp_path / "Makefile").write_text(f"browser:\n\t{recipe}\n")
    monkeypatch.setattr(provision, "REPO_ROOT", tmp_path)
    monkeypatch.setenv("QUICBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(provision.NO_INSTALL_ENV, raising=False)


def test_a_provision_runs_its_target_with_one_progress_line(tmp_path, monkeypatch, capsys):
    fake_repo(tmp_path, monkeypatch, "touch made")
    provision.ensure("browser")
    assert (tmp_path / "made").exists()
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("quicbench: first use: installing Debian's Chromium and Playwright, about 60 s")
    assert err[1].startswith("quicbench: browser ready in")


def test_a_failed_provision_says_why_and_the_fix(tmp_path, monkeypatch):
    fake_repo(tmp_path, monkeypatch, "echo 'E: Unable to locate package chromium' && false")
    with pytest.raises(QuicbenchError) as e:
        provision.ensure("browser")
    msg = str(e.value)
    assert "\n" not in msg and "Unable to locate package chromium" in msg and "make browser" in msg


def test_a_driver_is_provided_then_checked_again(tmp_path, monkeypatch):
    fake_repo(tmp_path, monkeypatch, "touch made")

    class Toy:
        provisions = ("browser",)

        @classmethod
        def available(cls):
            return (tmp_path / "made").exists(), "not made"

    assert provision.ensure_available(Toy) == (True, "not made")
