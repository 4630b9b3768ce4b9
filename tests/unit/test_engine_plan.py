"""Pure parts of the engine: the workload plan with data-fault windows, pacing, arm settings, the fault registry."""
from __future__ import annotations

import itertools
import re
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from chaos.arm.job import EventTimePacer
from chaos.faults.network import Toxic
from chaos.faults.registry import FAULTS, IMPLEMENTATIONS
from chaos.run import arm_config, planned_events, segments
from chaos.spec import load_experiment
from chaos.workload import Event, WorkloadSpec

ROOT = Path(__file__).resolve().parents[2]

BASE = """
name: plan-test
description: test
incident: {file: 003-cep-state-leak-key-rotation.txt, error: leak}
seed: 5
workload: {shape: uniform, keys: 20, rate: 50, partitions: 2}
job: {session_gap: 2s, max_session_length: 20s, watermark: 1s}
phases: {steady: 10s, inject: 20s, recover: 10s}
arms:
  hardened: {targets: {lost: 0}}
  naive: {targets: {lost: 0}}
"""


def spec_with(tmp_path, faults: str, scale: float = 1.0):
    path = tmp_path / "plan-test.yaml"
    path.write_text(BASE + textwrap.dedent(faults))
    return load_experiment(path, scale)


def test_a_hot_key_window_reshapes_only_its_window_and_keeps_seqs_unique(tmp_path):
    spec = spec_with(tmp_path, """
        faults:
          - {fault: data.hot_key, at: 5s, duration: 10s, params: {share: 0.5}}
    """)
    pieces = segments(spec, {})
    assert [(start, w.shape) for start, w in pieces] == [(0.0, "uniform"), (15.0, "hot_key"), (25.0, "uniform")]
    events = list(planned_events(pieces, start_ms=1_000_000))
    hot = [e for e in events if e.key == "hot-0"]
    assert hot and all(1_015_000 <= e.event_time_ms < 1_025_000 for e in hot)
    assert abs(len(hot) - 0.5 * 50 * 10) <= 1  # half of the window's events
    pairs = Counter((e.key, e.seq) for e in events)
    assert max(pairs.values()) == 1
    for key in {e.key for e in events}:  # per key, seqs are 0..n-1 in event-time order
        seqs = [e.seq for e in events if e.key == key]
        assert seqs == list(range(len(seqs)))
    assert events == sorted(events, key=lambda e: e.event_time_ms)
    assert abs(len(events) - 50 * 40) <= 3


def test_a_hot_key_windows_payload_size_reaches_only_the_hot_keys_events(tmp_path):
    spec = spec_with(tmp_path, """
        faults:
          - {fault: data.hot_key, at: 5s, duration: 10s, params: {share: 0.5, payload_bytes: 65536}}
    """)
    events = list(planned_events(segments(spec, {}), start_ms=0))
    assert {len(e.payload) for e in events if e.key == "hot-0"} == {65536}
    assert {len(e.payload) for e in events if e.key != "hot-0"} == {32}


def test_key_rotation_window_uses_the_rate_its_actors_imply(tmp_path):
    spec = spec_with(tmp_path, """
        faults:
          - {fault: data.key_rotation, at: 0s, duration: 20s, params: {live_actors: 10, gap: 4s}}
    """)
    pieces = segments(spec, {})
    rotating = [w for _, w in pieces if w.shape == "rotating"][0]
    assert rotating.rate == 2000 * 10 / 4000
    events = list(planned_events(pieces, 0))
    actors = {e.key for e in events if e.key.startswith("actor-")}
    assert len(actors) > 10  # keys retire and new ones replace them


def test_jitter_moves_the_window(tmp_path):
    spec = spec_with(tmp_path, """
        faults:
          - {fault: data.hot_key, at: 0s, duration: 5s, start_jitter: 5s}
    """)
    assert segments(spec, {0: 2.5})[1][0] == 12.5


def test_naive_arm_gets_no_event_time_settings(tmp_path):
    spec = spec_with(tmp_path, """
        faults:
          - {fault: network.down, target: kafka, at: 0s, duration: 5s}
    """)
    hardened, naive = arm_config(spec, "hardened"), arm_config(spec, "naive")
    assert hardened.settings == {"gap_ms": 2000, "max_session_ms": 20000, "watermark_ms": 1000, "expected_rate": 50.0}
    assert naive.settings == {"gap_ms": 2000, "expected_rate": 50.0}
    assert "--watermark" not in naive.job_args()


def test_the_drain_waits_out_a_session_gap_longer_than_its_default():
    from chaos.arm.config import drain_timeout_s

    assert drain_timeout_s(2_000) == drain_timeout_s(90_000) == 180.0  # every experiment before the scale suite
    assert drain_timeout_s(180_000) == 270.0  # the naive job's sessions close a gap after the last event's batch


def test_event_time_pacer_releases_events_when_due():
    start_ms = int(time.time() * 1000)
    # the third event is due 1 s in: a loaded machine may stall a while between these lines without moving it
    events = [Event("k", i, start_ms + offset, "") for i, offset in enumerate((0, 0, 1000, 10_000))]
    pacer = EventTimePacer(events, start_ms)
    assert pacer.take(1000) == 2
    wait = pacer.seconds_until_next()
    assert 0 < wait <= 1.0
    time.sleep(wait + 0.05)
    assert pacer.take(1000) == 1
    assert pacer.take(1000) == 0 and pacer.seconds_until_next() > 8


def test_every_catalogued_fault_has_an_implementation():
    assert set(IMPLEMENTATIONS) == set(FAULTS)


@pytest.mark.parametrize("direction, streams", [("both", ("upstream", "downstream")), ("upstream", ("upstream",))])
def test_toxic_attributes_and_directions(tmp_path, direction, streams):
    spec = spec_with(tmp_path, f"""
        faults:
          - {{fault: network.latency, target: spark-driver, at: 0s, duration: 5s,
              params: {{latency: 500ms, jitter: 100ms, direction: {direction}}}}}
    """)
    toxic = Toxic(spec.faults[0], ctx=None)
    assert toxic._attributes() == {"latency": 500, "jitter": 100}
    names = list(toxic._names())
    assert {proxy for proxy, _, _ in names} == {"spark-driver", "spark-driver-blocks"}
    assert {stream for _, stream, _ in names} == set(streams)


def test_only_a_control_judged_by_log_signatures_alone_may_end_early(tmp_path):
    from chaos.arm.schedule import ends_early

    spec = spec_with(tmp_path, """
        faults:
          - {fault: network.down, target: kafka, at: 0s, duration: 5s}
    """)
    assert not ends_early(spec.arm("hardened")) and not ends_early(spec.arm("naive"))  # naive: lost: 0
    path = tmp_path / "plan-test.yaml"
    path.write_text(path.read_text().replace("naive: {targets: {lost: 0}}",
                                             "naive: {targets: {logs: {expected: [boom]}, lineage: true}}"))
    assert ends_early(load_experiment(path).arm("naive"))
    # a bound of 0 is a target (0 == False in Python: this once let slow-s3-put's control stop at its log line)
    path.write_text(path.read_text().replace("naive: {targets: {logs: {expected: [boom]}, lineage: true}}",
                                             "naive: {targets: {logs: {expected: [boom]}, duplicated: 0}}"))
    assert not ends_early(load_experiment(path).arm("naive"))
    path.write_text(path.read_text().replace("naive: {targets: {logs: {expected: [boom]}, duplicated: 0}}",
                                             "naive: {expect: survives, note: why, targets: {logs: {expected: [x]}}}"))
    assert not ends_early(load_experiment(path).arm("naive"))


def test_the_recover_phase_outlasts_a_late_heal_by_the_recovery_bound():
    from chaos.arm.schedule import recovery_window_end
    from chaos.spec import Recovery

    bound = Recovery(within=30.0, healthy_samples=3, lag_below=2500)
    # process-crash in CI: recover phase 66.7-96.7 s, the broker back only at 86.0 s (a 23 s restart) -> the
    # phase lasts until 86.0 + 30 + 3 + 2 s, so a catch-up within the bound can be seen
    assert recovery_window_end(96.7, 86.0, bound) == pytest.approx(121.0)
    assert recovery_window_end(96.7, 50.0, bound) == 96.7  # an early heal: the planned end stands
    assert recovery_window_end(96.7, None, bound) == 96.7  # nothing healed: nothing to measure from
    assert recovery_window_end(96.7, 86.0, None) == 96.7  # no recovery target: the planned end stands


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("*.yaml")), ids=lambda p: p.stem)
def test_the_job_gets_an_arms_settings_as_one_document(path):
    """Settings sent once: the arm's settings go to the job as one --settings-json document of what departs from the
    profile, and the job (job/settings.py, the only place with defaults) resolves them to the spec's settings."""
    import dataclasses

    from job.settings import FACTORIES, from_args

    spec = load_experiment(path)
    for arm in spec.arms:
        config = arm_config(spec, arm.profile)
        args = config.job_args()
        assert args in ([], ["--settings-json", args[-1] if args else ""])
        job = from_args(["--profile", arm.profile, "--topic", "t", "--deployment", "d", "--progress-file", "p", *args])
        expected = spec.apply_settings(arm.profile, FACTORIES[arm.profile]("t", "d", "p"))
        if arm.profile == "naive":  # processing-time sessions: the event-time settings are not sent
            expected = dataclasses.replace(expected, watermark_ms=None, max_session_ms=None)
        assert job == expected
        assert (config.gap_ms, config.trigger_ms) == (job.gap_ms, job.trigger_ms)


@pytest.mark.parametrize("document, error", [
    ({"gap_ms": "3s"}, "setting 'gap_ms': '3s' is not a"),
    ({"lease": 1}, "setting 'lease': 1 is not a"),
    ({"kafka_options": {"kafka.x": 1}}, "setting 'kafka_options'"),
    ({"state_impl": "lists"}, "setting 'state_impl': 'lists'; allowed"),
    ({"gap": 3000}, "unknown setting 'gap'"),
    ({"topic": "other"}, "setting 'topic' is given by its own option (--topic)"),
])
def test_a_settings_document_is_checked_field_by_field(document, error, capsys):
    import json

    from job.settings import from_args, settings_document

    with pytest.raises(ValueError, match=re.escape(error)):
        settings_document(document)
    with pytest.raises(SystemExit):
        from_args(["--profile", "hardened", "--topic", "t", "--deployment", "d",
                   "--settings-json", json.dumps(document)])
    assert "--settings-json: " + error in capsys.readouterr().err


def test_the_plan_is_produced_as_it_falls_due_never_held_whole():
    """20 million events (a scale arm's hour): the first ones come at once, and the pacer over the stream releases
    what is due while the producer takes exactly those."""
    start_ms = int(time.time() * 1000)
    huge = WorkloadSpec("uniform", 3_000_000, 5_000.0, 4_000_000_000, 7, payload_bytes=1024)
    began = time.perf_counter()
    events = planned_events([(0.0, huge)], start_ms)
    pacer = EventTimePacer(events, start_ms)
    stream = pacer.events
    assert pacer.take(1000) >= 1
    taken = list(itertools.islice(stream, pacer.released))
    assert time.perf_counter() - began < 5.0  # planning the whole would take minutes and gigabytes
    assert len(taken) == pacer.released and taken[0].seq == 0
    assert all(e.event_time_ms <= time.time() * 1000 for e in taken)  # only events already due
    assert pacer.seconds_until_next() <= 0.2  # the next one is 1/5000 s later (negative when a busy machine lags)


def test_overlapping_windows_merge_in_event_time_and_seq_follows_it():
    a = WorkloadSpec("uniform", 1, 10.0, 1000, 1, payload_bytes=0)
    b = WorkloadSpec("uniform", 1, 10.0, 1000, 2, payload_bytes=0)
    events = list(planned_events([(0.0, a), (0.55, b)], 0))
    times = [e.event_time_ms for e in events]
    assert times == sorted(times) and len(events) == 20
    assert [e.seq for e in events] == list(range(20))  # one key ("k-0") in both: seq in event-time order
