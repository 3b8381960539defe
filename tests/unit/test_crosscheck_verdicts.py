"""The crosscheck's delay verdict: KS first, then equivalence within OWD_EQUIVALENT_MS."""

from quicbench.run.crosscheck import OWD_EQUIVALENT_MS, owd_verdict


def q(base: float, shift: float = 0.0) -> dict[str, float]:
    return {"p5": base - 1 + shift, "p25": base - 0.5 + shift, "p50": base + shift, "p75": base + 0.5 + shift,
            "p95": base + 1 + shift}


def test_ks_agreement_is_ok():
    assert owd_verdict(0.3, q(20), q(20, 5)) == "ok"


def test_a_tiny_shift_the_ks_test_finds_is_equivalent():
    v = owd_verdict(1e-9, q(20), q(20, 0.04))
    assert v.startswith("ok (equivalent") and "0.04 ms" in v


def test_a_shift_beyond_the_margin_differs():
    assert owd_verdict(1e-9, q(20), q(20, OWD_EQUIVALENT_MS + 0.01)) == "differ"
    tail = q(20)
    tail["p95"] += 1.3                       # UML's late timers: a tail the median does not show
    assert owd_verdict(1e-9, q(20), tail) == "differ"
