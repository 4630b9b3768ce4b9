"""Lifecycle triggers (chaos/triggers.py): the `on:` syntax, the seeded draws, and the key patterns s3proxy holds
requests by, matched against key names the job really writes (recorded from a run through s3proxy)."""
from __future__ import annotations

import random
import re

import pytest

from chaos.spec import SpecError, load_experiment
from chaos.state_held import sst_bytes
from chaos.triggers import EVENTS, Trigger, draw, key_pattern, parse_size

from .test_spec import base, write

DEPLOYMENT = "hardened-64bb8d0b"
# Keys a hardened job wrote in one run (s3proxy's events), relative to its deployment.
REAL = {
    "offsets_tmp": "checkpoint/offsets/.25.b64073ec-fb3d-4a5c-b4eb-ef3abc40bece.tmp",
    "offsets": "checkpoint/offsets/25",
    "commits": "checkpoint/commits/24",
    "changelog_tmp": "checkpoint/state/0/2/.5.changelog.f1ff052a-0f57-4dc2-9585-a4f5ea5398a9.TID38.tmp",
    "changelog": "checkpoint/state/0/1/5.changelog",
    "zip_tmp": "checkpoint/state/0/0/.25.zip.5dc552d6-cb63-42b7-95ae-a8a603148580.tmp",
    "zip": "checkpoint/state/0/0/25.zip",
    "sst": "checkpoint/state/0/2/SSTs/000008-7aac674a-92f9-4e64-9701-b5ccfa55eb55.sst",
    "schema": "checkpoint/state/0/0/_metadata/schema",
    "output": "output/batch-000000000031.jsonl",
    "lease": "checkpoint/_lease",
    "manifest": "checkpoint/_integrity/manifests/000000000026.json",
}


def matches(event: str, trigger: Trigger | None = None) -> dict[str, int | None]:
    """Which real keys the event's pattern matches, with the batch each one gives."""
    trigger = trigger or Trigger((event,))
    pattern = re.compile(key_pattern(EVENTS[event], DEPLOYMENT, trigger))
    found = {}
    for name, key in REAL.items():
        match = pattern.search(f"{DEPLOYMENT}/{key}")
        if match:
            found[name] = EVENTS[event].batch_of(match)
    return found


def test_each_event_holds_exactly_the_requests_it_names():
    assert matches("first_batch") == {"offsets_tmp": 25}
    assert matches("offsets_written") == {"offsets": 25}
    assert matches("commit_written") == {"commits": 24}
    assert matches("state_put_started") == {"changelog_tmp": 4, "zip_tmp": 24, "sst": None}
    assert matches("state_put_done") == {"changelog": 4, "zip": 24, "sst": None}
    assert matches("output_put_started") == matches("output_written") == {"output": 31}
    assert matches("lease_renewed") == {"lease": None}
    assert matches("manifest_written") == {"manifest": 25}
    assert all(not re.search(key_pattern(e, "other-deployment", Trigger((e.name,))), f"{DEPLOYMENT}/{k}")
               for e in EVENTS.values() if e.ops for k in REAL.values())  # never another arm's requests


def test_a_batch_or_a_state_kind_narrows_the_pattern():
    assert matches("commit_written", Trigger(("commit_written",), batch=24)) == {"commits": 24}
    assert matches("commit_written", Trigger(("commit_written",), batch=3)) == {}
    assert matches("output_written", Trigger(("output_written",), batch=31)) == {"output": 31}  # zero-padded name
    assert matches("manifest_written", Trigger(("manifest_written",), batch=25)) == {"manifest": 25}
    assert matches("commit_written", Trigger(("commit_written",), batch=4)) == {}  # 24 is not 4
    assert matches("state_put_done", Trigger(("state_put_done",), batch=4)) == {"changelog": 4}
    assert matches("state_put_started", Trigger(("state_put_started",), state_kind="zip")) == {"zip_tmp": 24}
    assert matches("state_put_started", Trigger(("state_put_started",), state_kind="sst")) == {"sst": None}


def test_draws_are_seeded_so_a_seed_replays_the_same_moments():
    trigger = Trigger(("job_started", "commit_written", "state_put_started"), skip=(0, 3), after=(2.0, 14.0))
    first = [draw(trigger, random.Random("15:1")).to_dict() for _ in range(1)]
    sequence = [draw(trigger, rng).to_dict() for rng in [random.Random("15:1")] for _ in range(8)]
    again = [draw(trigger, rng).to_dict() for rng in [random.Random("15:1")] for _ in range(8)]
    assert sequence == again and sequence[0] == first[0]
    assert {d["event"] for d in sequence} <= set(trigger.events)
    assert all(0 <= d["skip"] <= 3 for d in sequence)
    assert all((2.0 <= d["after"] <= 14.0) if d["event"] == "job_started" else d["after"] == 0 for d in sequence)


def _with_on(tmp_path, on: object, fault: dict | None = None):
    doc = base()
    doc["faults"] = [{**(fault or {"fault": "process.kill", "target": "job-driver", "params": {"count": 2}}),
                      "on": on}]
    doc["arms"]["hardened"]["targets"]["recovery"]["grouped"] = True  # two kills on events: closer than a recovery
    return load_experiment(write(tmp_path, doc))


def test_a_spec_takes_on_and_keeps_it_through_spec_json(tmp_path):
    import json

    from chaos.spec import ExperimentSpec

    spec = _with_on(tmp_path, {"event": ["job_started", "commit_written"], "skip": [0, 2], "after": ["1s", "9s"]})
    assert spec.faults[0].on == Trigger(("job_started", "commit_written"), skip=(0, 2), after=(1.0, 9.0))
    assert ExperimentSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_state_reached_takes_a_size_and_keeps_it_through_spec_json(tmp_path):
    import json

    from chaos.spec import ExperimentSpec

    spec = _with_on(tmp_path, {"event": "state_reached", "bytes": "1GiB"})
    assert spec.faults[0].on == Trigger(("state_reached",), state_bytes=2**30)
    assert ExperimentSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert _with_on(tmp_path, {"event": "state_reached", "bytes": 5000}).faults[0].on.state_bytes == 5000


@pytest.mark.parametrize("text, size", [
    ("1GiB", 2**30), ("512 MiB", 512 * 2**20), ("1.5GB", 1_500_000_000), ("64KiB", 65536), ("100", 100), (7, 7),
    ("0.1B", None), ("-1GiB", None), ("1 GiB of state", None), (True, None), (1.5, None), (0, None), ("", None),
])
def test_sizes_are_read_in_binary_and_decimal_units(text, size):
    assert parse_size(text) == size


def test_sst_bytes_sum_the_state_operators_of_a_progress():
    progress = {"stateOperators": [{"customMetrics": {"rocksdbSstFileSize": 700}},
                                   {"customMetrics": {"rocksdbSstFileSize": 300, "rocksdbGetCount": 9}},
                                   {"customMetrics": {}}]}
    assert sst_bytes(progress) == 1000
    assert sst_bytes({"batchId": 0}) == sst_bytes({"stateOperators": None}) == 0  # no state yet: nothing reached


@pytest.mark.parametrize("on, fault, message", [
    ({"event": "nope"}, None, "faults.0.on.event: unknown event 'nope'"),
    ({}, None, "faults.0.on.event: missing"),
    ({"event": "commit_written", "when": 1}, None, "faults.0.on.when: unknown field"),
    ({"event": ["commit_written", "commit_written"]}, None, "faults.0.on.event: "),
    ({"event": "lease_renewed", "batch": 2}, None, "faults.0.on.batch: needs one event that belongs to a batch"),
    ({"event": "commit_written", "batch": -1}, None, "faults.0.on.batch: -1 is not valid"),
    ({"event": "commit_written", "after": "3s"}, None, "faults.0.on.after: only applies to job_started"),
    ({"event": "commit_written", "skip": [3, 1]}, None, "faults.0.on.skip: [3, 1]: low is above high"),
    ({"event": "commit_written", "state_kind": "zip"}, None, "faults.0.on.state_kind: only applies to state_put"),
    ({"event": "commit_written", "for": "2s"}, None, "faults.0.on.for: process.kill acts at once"),
    ({"event": "state_reached"}, None, "faults.0.on.bytes: missing"),
    ({"event": "state_reached", "bytes": "1 lot"}, None, "faults.0.on.bytes: '1 lot' is not valid"),
    ({"event": "state_reached", "bytes": 0}, None, "faults.0.on.bytes: 0 is not valid"),
    ({"event": "commit_written", "bytes": "1GiB"}, None, "faults.0.on.bytes: only applies to state_reached"),
    ({"event": ["state_reached", "job_started"], "bytes": "1GiB"}, None, "faults.0.on.bytes: only applies"),
    ({"event": "state_reached", "bytes": "1GiB", "batch": 3}, None, "faults.0.on.batch: needs one event that"),
    ({"event": "commit_written"}, {"fault": "data.hot_key"}, "faults.0.on: data.hot_key cannot fire on a lifecycle"),
    ({"event": "commit_written"}, {"fault": "process.kill", "target": "job-driver", "params": {"interval": "2s"}},
     "faults.0.params.interval: a triggered kill fires on its events, not at intervals"),
])
def test_a_bad_trigger_is_one_line_naming_its_field(tmp_path, on, fault, message):
    with pytest.raises(SpecError) as caught:
        _with_on(tmp_path, on, fault)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_suite_entry_can_draw_a_new_seed_each_run_and_the_spec_records_it(tmp_path):
    import yaml

    from chaos.spec import load_suite

    write(tmp_path, base())
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump({"name": "s", "experiments": [
        {"path": "exp.yaml", "seed": "random"}, {"path": "exp.yaml", "seed": 7, "overrides": {"name": "again"}}]}))
    seeds = {load_suite(tmp_path / "suite.yaml").entries[0].spec.seed for _ in range(5)}
    assert len(seeds) > 1  # drawn per load, not fixed
    assert load_suite(tmp_path / "suite.yaml").entries[1].spec.seed == 7
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"name": "s", "experiments": [{"path": "exp.yaml",
                                                                                       "seed": "often"}]}))
    with pytest.raises(SpecError, match="experiments.0.seed: 'often' is not valid"):
        load_suite(tmp_path / "bad.yaml")


def _progress_line(batch: int, sst: int) -> str:
    import json

    return json.dumps({"event": "progress", "progress": {
        "batchId": batch, "stateOperators": [{"customMetrics": {"rocksdbSstFileSize": sst}}]}}) + "\n"


def test_state_reached_fires_on_the_first_later_batch_that_reports_the_size(tmp_path):
    import threading
    import time

    from chaos.arm.lifecycle import LifecycleWatch
    from chaos.triggers import Draw

    path = tmp_path / "progress.jsonl"
    path.write_text(_progress_line(7, 5000))  # already past the size, but completed before the watch: not a firing
    watch = LifecycleWatch(None, "d", progress_path=path)
    trigger, chosen = Trigger(("state_reached",), state_bytes=4000), Draw("state_reached", 0, 0.0)

    def append() -> None:
        time.sleep(0.3)
        with open(path, "a") as handle:
            handle.write(_progress_line(8, 3999) + '{"event": "started"}\n')
            handle.flush()
            time.sleep(0.3)
            handle.write(_progress_line(9, 4000))

    writer = threading.Thread(target=append)
    writer.start()
    occurrence = watch.wait(trigger, chosen, time.monotonic() + 10, threading.Event())
    writer.join()
    assert occurrence is not None and (occurrence.batch, occurrence.state_bytes) == (9, 4000)
    assert occurrence.to_dict()["state_bytes"] == 4000
    # no later batch reaches it: the window ends without a firing
    assert watch.wait(trigger, chosen, time.monotonic() + 0.6, threading.Event()) is None
