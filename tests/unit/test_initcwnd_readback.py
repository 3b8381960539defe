"""How a lab reads TCP's initial window back from `ip route get` (the kernel's words), and
refuses a lab whose kernels report another window than the plan's."""

import pytest

from quicbench.errors import QuicbenchError
from quicbench.lab.base import KERNEL_INITCWND, Lab, LabSpec


class Routes(Lab):
    """A lab whose nodes answer `ip route get` with a fixed text (echo), nothing else."""
    name = "routes"

    def __init__(self, spec: LabSpec, answers: dict[str, str]):
        super().__init__(spec)
        self.answers = answers

    def _claim(self): ...
    def _create(self): ...
    def _destroy(self): ...
    def routers(self): return []
    def interface(self, node, towards): return "eth0"
    def address(self, node): return {"client": "198.18.0.1", "server": "198.18.1.2"}[node]

    def cmd(self, node, argv):
        assert argv[:3] == ["ip", "route", "get"] and argv[3] == self.address("server" if node == "client" else "client")
        return ["printf", "%s", self.answers[node]]


def answer(window: int | None) -> str:
    metric = f"\n    cache initcwnd {window} " if window is not None else "\n    cache "
    return f"198.18.1.2 via 198.18.0.2 dev eth0 src 198.18.0.1 uid 0 {metric}\n"


def test_windows_are_read_from_each_endpoints_route_and_default_to_the_kernels():
    lab = Routes(LabSpec(name="t"), {"client": answer(27), "server": answer(None)})
    assert lab.initial_windows() == {"client": 27, "server": KERNEL_INITCWND}
    assert lab.initcwnd_option() == ""
    assert Routes(LabSpec(name="t", tcp_initcwnd=27), {}).initcwnd_option() == " initcwnd 27"


def test_a_window_the_kernel_does_not_report_fails_the_lab_naming_the_endpoint():
    lab = Routes(LabSpec(name="t", tcp_initcwnd=27), {"client": answer(27), "server": answer(None)})
    with pytest.raises(QuicbenchError, match=r"^tcp_initcwnd: set 27 segments, the kernel reports 10 at the server$"):
        lab.check_initial_windows()
    assert "tcp_initcwnd" not in lab.state
    ok = Routes(LabSpec(name="t", tcp_initcwnd=27), {"client": answer(27), "server": answer(27)})
    ok.check_initial_windows()
    assert ok.state["tcp_initcwnd"] == 27


@pytest.mark.parametrize("bad", [0, 1001])
def test_the_spec_takes_1_to_1000_segments(bad):
    with pytest.raises(ValueError, match="tcp_initcwnd"):
        LabSpec(name="t", tcp_initcwnd=bad)
