"""The gait classifier on synthetic contact sequences of every class, and its measures on hand-made patterns."""

import numpy as np
import pytest

from diffloco_ext.tasks.velocity.gaits import GAITS
from diffloco_ext.validation.gait_analysis import (
    CLASSES,
    LEGS,
    classify_offsets,
    gait_summary,
    measure_gait,
)

DT = 0.02  # s: the policy step


def pattern(offsets, duty=0.5, period=0.6, seconds=10.0, jitter=0.0, seed=0):
    """Stance [T, 4] of feet whose swings start at ``offsets`` (cycle fractions, LEGS order) and last
    ``1 - duty`` of each ``period``; ``jitter``: the SD (s) of a random shift of each cycle's timing per foot."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds / DT)) * DT
    out = np.ones((len(t), len(offsets)), dtype=bool)
    for f, o in enumerate(offsets):
        for k in range(-1, int(seconds / period) + 2):
            start = (k + o) * period + (rng.normal(0.0, jitter) if jitter else 0.0)
            out[(t >= start) & (t < start + (1.0 - duty) * period), f] = False  # in swing
    return out


@pytest.mark.parametrize("name", ["trot", "pace", "bound", "pronk", "gallop"])
def test_named_gaits_are_classified_as_themselves(name):
    offsets = [GAITS[name][leg] for leg in LEGS]
    assert classify_offsets(GAITS[name]) == (name, pytest.approx(0.0, abs=1e-9))
    for duty, period, jitter, seed in ((0.5, 0.6, 0.0, 0), (0.6, 0.5, 0.01, 1), (0.4, 0.7, 0.015, 2)):
        m = measure_gait(pattern(offsets, duty, period, jitter=jitter, seed=seed), DT)
        assert m.gait == name, (duty, period, m)
        assert m.stride_frequency == pytest.approx(1.0 / period, rel=0.05)
        np.testing.assert_allclose(m.duty, duty, atol=0.04)
        assert np.all(np.abs(np.mod(m.phase_offsets - np.array(offsets) + 0.5, 1.0) - 0.5) < 0.05)


@pytest.mark.parametrize("offsets, gait", [((0.0, 0.5, 0.75, 0.25), "walk"), ((0.0, 0.5, 0.25, 0.75), "walk"),
                                           ((0.0, 0.2, 0.7, 0.5), "gallop"),  # rotary
                                           ((0.0, 0.85, 0.5, 0.35), "gallop"),  # transverse, right lead
                                           ((0.0, 0.25, 0.5, 0.0), "irregular")])  # no class within 0.1
def test_other_classes(offsets, gait):
    assert measure_gait(pattern(offsets, duty=0.7), DT).gait == gait


def test_stand_and_three_legs_and_no_phase_relation():
    assert measure_gait(np.ones((500, 4), dtype=bool), DT).gait == "stand"
    three = pattern((0.0, 0.5, 0.5, 0.0))
    three[:, 3] = True  # RH never lifts
    assert measure_gait(three, DT).gait == "irregular"
    # each foot at its own period: no fixed phase relation to LF
    rng = np.random.default_rng(3)
    loose = np.stack([pattern((0.0,) * 4, period=p, seconds=20.0)[:, 0] for p in (0.5, 0.63, 0.71, 0.83)], axis=1)
    m = measure_gait(loose, DT)
    assert m.gait == "irregular" and m.consistency[1:].min() < 0.6
    # random contacts
    assert measure_gait(rng.random((1000, 4)) < 0.5, DT).gait == "irregular"


def test_window_restricts_the_events():
    """Only the window's steps count, and no footfall or interval bridges two stretches of it: a trot, then a pace,
    measured over the trot's half is a trot, over both a mixture that is no one gait."""
    trot, pace = pattern((0.0, 0.5, 0.5, 0.0)), pattern((0.0, 0.5, 0.0, 0.5))
    both = np.concatenate([trot, pace])
    window = np.zeros(len(both), dtype=bool)
    window[:len(trot)] = True
    assert measure_gait(both, DT, window).gait == "trot"
    assert measure_gait(both, DT, ~window).gait == "pace"
    assert measure_gait(both, DT).gait == "irregular"
    # two stretches of the same trot with a gap: still a trot at its frequency (no interval across the gap)
    window = np.ones(len(trot), dtype=bool)
    window[200:233] = False
    m = measure_gait(trot, DT, window)
    assert m.gait == "trot" and m.stride_frequency == pytest.approx(1 / 0.6, rel=0.05)
    assert m.seconds == pytest.approx((len(trot) - 33) * DT)


def test_summary_shares_and_mismatch():
    ms = [measure_gait(pattern((0.0, 0.5, 0.0, 0.5)), DT)] * 3 + [measure_gait(np.ones((100, 4), bool), DT)]
    s = gait_summary(ms, expected="pace")
    assert s["windows"] == 4 and s["share"]["pace"] == 0.75 and s["share"]["stand"] == 0.25
    assert s["mismatch"] == pytest.approx(0.25) and set(s["share"]) == set(CLASSES)
    assert np.isnan(gait_summary([], expected="pace")["mismatch"])
    with pytest.raises(ValueError, match="one column per foot"):
        measure_gait(np.ones((10, 3), bool), DT)
