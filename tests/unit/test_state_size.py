"""The workload's state-size knobs: keys into the millions, payload bytes, session length (rotation_events) and
concurrency (rotation_live_actors), and the attributes the hardened job keeps per open session (attribute_bytes):
what the producer emits for them, how a spec refuses bad ones in one line, and what reaches the job's settings."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from chaos.errors import SpecError
from chaos.spec import load_experiment
from chaos.workload import WorkloadSpec, plan, rotation_rate
from job import settings as job_settings
from job.sessions import build

SPEC = """
name: t-state-size
description: test
incident: {file: 001-x.txt, error: boom}
seed: 1
workload: {shape: rotating, rate: 150, rotation_live_actors: 100, rotation_gap: 1s, rotation_events: 3,
           payload_bytes: 1024, attribute_bytes: 1000}
phases: {steady: 10s, inject: 20s, recover: 10s}
faults:
  - {fault: network.down, target: kafka, at: 0s, duration: 5s}
arms:
  hardened:
    targets: {progress: true, lost: 0, duplicated: 0}
  naive:
    targets: {logs: {expected: ["boom"]}}
"""


def sessions(live: int = 30, gap_ms: int = 500, events: int = 4, payload_bytes: int = 64) -> WorkloadSpec:
    return WorkloadSpec("rotating", 1, rotation_rate(live, gap_ms, events), 20_000, 7, rotation_live_actors=live,
                        rotation_gap_ms=gap_ms, rotation_events=events, payload_bytes=payload_bytes)


# -- what the producer emits ------------------------------------------------------------------------------------

def test_each_session_is_rotation_events_long_at_the_gap_with_full_payloads():
    s = sessions()
    by_key: dict[str, list] = {}
    for e in plan(s):
        by_key.setdefault(e.key, []).append(e)
    assert by_key and all([e.seq for e in evs] == [0, 1, 2, 3] for evs in by_key.values())
    assert all(b.event_time_ms - a.event_time_ms == 500 for evs in by_key.values() for a, b in zip(evs, evs[1:]))
    assert all(len(e.payload) == 64 for evs in by_key.values() for e in evs)


def test_concurrency_is_the_live_actors_and_the_rate_is_littles_law():
    s = sessions()
    life = (s.rotation_events - 1) * s.rotation_gap_ms
    live, steady, times = set(), [], []
    for t, group in itertools.groupby(plan(s), key=lambda e: e.event_time_ms):
        for e in group:
            times.append(t)
            if e.seq == 0:
                live.add(e.key)
            elif e.seq == s.rotation_events - 1:
                live.remove(e.key)
        if life <= t < s.duration_ms - life:
            steady.append(len(live))
    assert steady and set(steady) == {s.rotation_live_actors}
    assert times == sorted(times)
    assert sum(1 for t in times if 5000 <= t < 15_000) == s.rate * 10 == 800  # 30 actors * 4 events / 1.5 s


def test_events_in_order_and_two_events_per_session_is_the_old_rotation():
    two = sessions(events=2, live=50, gap_ms=1000)
    assert two.rate == 100.0  # 2 * live / gap, as before rotation_events
    assert [e.seq for e in itertools.islice(plan(two), 3)] == [0, 0, 0]


def test_a_million_keys_plan_lazily():
    s = WorkloadSpec("uniform", 3_000_000, 20_000.0, 600_000, 7, payload_bytes=1024)
    head = list(itertools.islice(plan(s), 1000))
    assert len({e.key for e in head}) > 990 and all(len(e.payload) == 1024 for e in head)


@pytest.mark.parametrize("events", [1, 0, 2.5, True])
def test_a_session_of_fewer_than_two_events_is_one_line(events):
    with pytest.raises(ValueError) as caught:
        WorkloadSpec("rotating", 1, 100.0, 1000, 7, rotation_live_actors=50, rotation_gap_ms=1000,
                     rotation_events=events)
    assert str(caught.value).startswith("rotation_events: ") and "\n" not in str(caught.value)


# -- the spec ---------------------------------------------------------------------------------------------------

def load(tmp_path: Path, **workload: object):
    doc = yaml.safe_load(SPEC)
    doc["workload"].update(workload)
    doc["workload"] = {k: v for k, v in doc["workload"].items() if v is not None}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_experiment(path), path


def test_the_knobs_reach_the_workload_and_the_hardened_jobs_settings(tmp_path):
    spec, _ = load(tmp_path)
    w = spec.workload
    assert (w.rotation_events, w.attribute_bytes, w.payload_bytes) == (3, 1000, 1024)
    hardened = spec.apply_settings("hardened", job_settings.hardened("t", "d", ""))
    assert hardened.attribute_bytes == 1000
    defaults, _ = load(tmp_path, attribute_bytes=None)
    assert defaults.apply_settings("hardened", job_settings.hardened("t", "d", "")).attribute_bytes == 0


@pytest.mark.parametrize("workload, message", [
    (dict(attribute_bytes=2000), "workload.attribute_bytes: 2000 is more than the payload it is cut from; allowed: "
                                 "at most payload_bytes (1024)"),
    (dict(attribute_bytes=-1), "workload.attribute_bytes: -1 is not valid; allowed: an integer >= 0 and <= 4096"),
    (dict(rotation_events=1), "workload.rotation_events: 1 is not valid; allowed: an integer >= 2 and <= 1000000"),
    (dict(rate=100), "workload.rate: 100 events/s disagrees with 100 live actors sending 3 events 1s apart; allowed: "
                     "rotation_live_actors * rotation_events / ((rotation_events - 1) * rotation_gap) = 150"),
    (dict(shape="uniform", keys=3_000_000, rate=20_000, rotation_live_actors=None, rotation_gap=None),
     "workload.rotation_events: only applies to shape rotating; allowed: for shape uniform: no shape params"),
], ids=["attributes-past-payload", "negative-attributes", "one-event-session", "rate-off-littles-law",
        "events-on-uniform"])
def test_a_bad_knob_is_one_line_naming_the_field(tmp_path, workload, message):
    with pytest.raises(SpecError) as caught:
        load(tmp_path, **workload)
    assert str(caught.value) == f"{tmp_path / 'exp.yaml'}: {message}"


def test_keys_into_the_millions_load(tmp_path):
    spec, _ = load(tmp_path, shape="uniform", keys=3_000_000, rate=20_000, rotation_live_actors=None,
                   rotation_gap=None, rotation_events=None)
    assert spec.workload.keys == 3_000_000 and spec.workload.rotation_events is None


# -- the job ----------------------------------------------------------------------------------------------------

def test_a_state_that_keeps_no_attributes_refuses_them():
    hardened = job_settings.hardened("t", "d", "", attribute_bytes=100, state_impl="tws-rows")
    with pytest.raises(ValueError, match="^attribute_bytes: state_impl 'tws-rows' keeps no attributes"):
        build(None, hardened)  # type: ignore[arg-type]  # refused before the events are touched


def test_a_settings_document_refuses_negative_attributes():
    with pytest.raises(ValueError, match="attribute_bytes"):
        job_settings.settings_document({"attribute_bytes": -5})
