"""crosscheck's verdicts on synthetic sides (pure: no lab, no UML); the delay verdict: KS first,
then equivalence within OWD_EQUIVALENT_MS."""

import random

import pytest

from quicbench.model.conditions import Condition
from quicbench.run.crosscheck import OWD_EQUIVALENT_MS, compare, delay_only, drain_s, owd_verdict

COND = Condition.model_validate({"name": "c", "delay_ms": 20, "jitter_ms": 5, "loss_pct": 2})


def side(seed, shift=0.0, noise=0.05, loss=0.02, dup=0.0, reorder=0.4, n=2000):
    rng = random.Random(seed)

    def phase(jitter):
        out = {}
        for d in ("up", "down"):
            xs = sorted(20 + (shift if jitter else 0) + (rng.uniform(-jitter, jitter) if jitter else 0) + rng.expovariate(1 / noise)
                        for _ in range(int(n * (1 - loss if jitter else 1))))
            out[d] = {"sent": n, "loss_frac": loss if jitter else 0.0, "dup_frac": dup, "reorder_frac": reorder if jitter else 0,
                      "owd_samples_ms": xs, "owd_ms": {"p50": xs[len(xs) // 2], "p95": xs[int(len(xs) * 0.95)],
                                                      "p99": xs[int(len(xs) * 0.99)]}}
        return out
    return {"floor": phase(0), "condition": phase(5)}


def test_delay_only_keeps_the_delays_per_direction_and_hop():
    c = Condition.model_validate({"name": "x", "hops": [{"delay_ms": 5, "loss_pct": 1},
                                                        {"up": {"delay_ms": 7}, "down": {"jitter_ms": 2}}]})
    f = delay_only(c)
    assert [(h.up.delay_ms, h.down.delay_ms) for h in f.hops] == [(5, 5), (7, 0)]
    assert all(h.up.loss_pct == 0 and h.down.jitter_ms == 0 for h in f.hops)


def test_same_emulator_different_noise_agrees():
    # side b's noise is 10x side a's: the cross-added noise makes them comparable
    v = compare(COND, side(1), side(2, noise=0.5))
    assert v["ok"], v
    assert v["up"]["owd"]["verdict"] == "ok" and v["down"]["loss"]["verdict"] == "ok"


def test_a_delay_difference_is_found():
    # the emulator (condition) is 1 ms later; its floor is not
    v = compare(COND, side(1), side(2, shift=1.0))
    assert not v["ok"] and v["up"]["owd"]["verdict"] == "differ"


def test_a_side_that_is_late_by_itself_is_not_blamed():
    # both phases 1 ms late (the side's own offset, e.g. a slower kernel): not the emulator
    a, b = side(1), side(2)
    for phase in ("floor", "condition"):
        for d in ("up", "down"):
            b[phase][d]["owd_samples_ms"] = [x + 1 for x in b[phase][d]["owd_samples_ms"]]
    # cross-added noise puts b's +1 ms into a's samples as well
    assert compare(COND, a, b)["up"]["owd"]["verdict"] == "ok"


def test_loss_duplicates_and_reorder_differences_are_found():
    v = compare(COND, side(1), side(2, loss=0.06, dup=0.03, reorder=0.6))
    assert v["up"]["loss"]["verdict"] == "differ"
    assert v["up"]["duplicates"]["verdict"] == "differ"
    assert v["up"]["reorder"]["verdict"] == "differ"
    assert compare(COND, side(1, reorder=0.40), side(2, reorder=0.42))["up"]["reorder"]["verdict"] == "ok"


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


def test_a_probe_waits_for_the_paths_worst_delay_before_stopping_at_a_gap():
    two = Condition.model_validate({"name": "x", "hops": [{"up": {"delay_ms": 100, "jitter_ms": 20}, "down": {}},
                                                          {"up": {"delay_ms": 50}, "down": {"delay_ms": 10}}]})
    assert drain_s(two, "up") == pytest.approx(0.3 + 2 * 0.170)
    assert drain_s(two, "down") == pytest.approx(0.3 + 2 * 0.010)
