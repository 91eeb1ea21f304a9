"""accelkit.pipeline_model: GPipe's schedule and its bubble agree, and the schedule is valid."""

from __future__ import annotations

import pytest

from accelkit import pipeline_model as pm


@pytest.mark.parametrize("p,m", [(1, 1), (2, 4), (4, 12), (3, 1), (8, 32)])
def test_every_stage_idles_the_bubble_of_the_formula(p, m):
    slots = pm.gpipe_schedule(p, m)
    length = pm.schedule_length(p, m)
    assert len(slots) == 2 * p * m
    for s in range(p):
        busy = [x.start for x in slots if x.stage == s]
        # fails when a stage runs two things at once or a slot lies outside the step
        assert len(set(busy)) == len(busy) and 0 <= min(busy) and max(busy) < length
        assert 1 - len(busy) / length == pytest.approx(pm.bubble_fraction(p, m))


def test_schedule_respects_the_data_dependencies():
    p, m = 4, 6
    at = {(x.stage, x.kind, x.microbatch): x.start for x in pm.gpipe_schedule(p, m)}
    for i in range(m):
        for s in range(1, p):  # forward flows down the stages, backward back up
            assert at[(s, "F", i)] > at[(s - 1, "F", i)]
            assert at[(s - 1, "B", i)] > at[(s, "B", i)]
        assert at[(p - 1, "B", i)] > at[(p - 1, "F", m - 1)]  # backward after all forwards


def test_bubble_formula_and_errors():
    assert pm.bubble_fraction(4, 12) == pytest.approx(3 / 15)
    assert pm.bubble_fraction(1, 5) == 0.0
    with pytest.raises(ValueError):
        pm.bubble_fraction(0, 4)
    with pytest.raises(TypeError):
        pm.bubble_fraction(2.0, 4)


@pytest.mark.parametrize("p,m", [(1, 1), (2, 4), (4, 8), (4, 12), (3, 2)])
def test_1f1b_keeps_the_bubble_and_holds_fewer_micro_batches(p, m):
    slots = pm.one_f_one_b_schedule(p, m)
    assert len(slots) == 2 * p * m
    length = max(x.start for x in slots) + 1
    # fails when the schedule is longer than GPipe's: 1F1B has the same bubble
    assert length == pm.schedule_length(p, m)
    at = {(x.stage, x.kind, x.microbatch): x.start for x in slots}
    for s in range(p):
        busy = [x.start for x in slots if x.stage == s]
        assert len(set(busy)) == len(busy)                 # one thing at a time
        # fails when 1F1B holds as many micro-batches as GPipe (no memory saving)
        assert pm.peak_in_flight(slots, s) == min(p - s, m)
        assert pm.peak_in_flight(pm.gpipe_schedule(p, m), s) == m
        for i in range(m):
            if s:
                assert at[(s, "F", i)] > at[(s - 1, "F", i)]
                assert at[(s - 1, "B", i)] > at[(s, "B", i)]
            assert at[(s, "B", i)] > at[(s, "F", i)]


def test_peak_in_flight_needs_the_stage():
    with pytest.raises(ValueError):
        pm.peak_in_flight(pm.gpipe_schedule(2, 2), 5)
