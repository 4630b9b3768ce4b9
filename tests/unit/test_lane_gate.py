"""The lanes' turns (chaos/lanes/gate.py): real flock locks on a file of a temporary run directory; each gate stands for
one lane (a flock belongs to an open file, so two gates of one process exclude each other as two lanes do)."""
from __future__ import annotations

import re
import time

import pytest

from chaos.lanes.gate import LaneGate


def test_a_start_waits_for_another_lanes_turn_and_gives_up_when_bounded(tmp_path):
    lines: list[str] = []
    first = LaneGate(tmp_path).start(lines.append)
    assert first.held and lines == []
    began = time.monotonic()
    second = LaneGate(tmp_path, wait_s=0.6).start(lines.append)
    assert time.monotonic() - began >= 0.6
    assert not second.held
    assert lines == ["lane gate: no turn within 1 s; starting beside the other lanes"]
    second.release()  # nothing held: a no-op
    first.release()
    third = LaneGate(tmp_path, wait_s=0.5).start(lines.append)
    assert third.held  # given back by release()
    third.release()


def test_a_turn_is_given_back_when_the_steady_phase_ends(tmp_path):
    lines: list[str] = []
    first = LaneGate(tmp_path).start(lines.append)
    first.steady(1.2)
    began = time.monotonic()
    second = LaneGate(tmp_path, wait_s=10).start(lines.append)
    waited = time.monotonic() - began
    assert second.held and 1.0 <= waited < 5, waited
    # the wait as printed, rounded to seconds: 1 s, or 2 s when the gate's checks wake late on a loaded machine
    assert len(lines) == 1 and re.fullmatch(r"lane gate: waited [12] s for another lane's start and steady phase",
                                            lines[0]), lines
    first.release()  # after its timer gave the turn back: a no-op, and it must not release the second's
    assert not LaneGate(tmp_path, wait_s=0.3).start(lines.append).held
    second.release()


def test_release_gives_the_turn_back_before_the_steady_phase_ends(tmp_path):
    first = LaneGate(tmp_path).start(print)
    first.steady(30)
    first.release()  # the arm ended early (an error): its `finally`
    began = time.monotonic()
    second = LaneGate(tmp_path, wait_s=2).start(print)
    assert second.held and time.monotonic() - began < 1
    second.release()


def test_a_gate_spanning_the_start_only_gives_the_turn_back_as_the_steady_phase_begins(tmp_path):
    first = LaneGate(tmp_path, span="start").start(print)
    assert first.held
    first.steady(60.0)  # the steady phase would hold a `steady` gate's turn for a minute
    assert not first.held
    assert LaneGate(tmp_path, wait_s=0.3).start(print).held


def test_the_gate_span_comes_from_the_environment_and_a_bad_one_is_one_line(monkeypatch):
    from chaos.errors import USAGE, ChaosError
    from chaos.lanes.gate import span_from_env
    monkeypatch.delenv("CHAOS_LANE_GATE", raising=False)
    assert span_from_env() == "steady"
    monkeypatch.setenv("CHAOS_LANE_GATE", "off")
    assert span_from_env() == "off"
    monkeypatch.setenv("CHAOS_LANE_GATE", "sometimes")
    with pytest.raises(ChaosError) as error:
        span_from_env()
    assert error.value.exit_code == USAGE
    assert str(error.value) == "CHAOS_LANE_GATE='sometimes' is not one of steady, start, off; unset it for the " \
                               "default (steady)"
