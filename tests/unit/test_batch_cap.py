"""A deployer's batch cap sized from the trigger and the input rate (job/settings.py batch_cap, docs/job.md): a batch
takes at most `catch_up_factor` trigger intervals of input, never fewer than the floor. The hardened profile sets no
cap (docs/job.md "Removed switches")."""
from __future__ import annotations

import pytest

from chaos.spec import load_experiment
from chaos.switches import SWITCHES
from job.settings import BATCH_CAP_FLOOR, batch_cap, from_args, hardened, naive, resolve


@pytest.mark.parametrize("trigger_ms, rate, cap", [
    (1_000, 200, BATCH_CAP_FLOOR),      # every experiment's rate: the floor, the batches they were measured with
    (1_000, 2_000, 20_000),             # where the rule meets the floor
    (1_000, 5_000, 50_000),             # 10 s of input a batch
    (5_000, 20_000, 1_000_000),         # issue 37's probe: a fixed 20,000 processed 4,000 of 20,000 events/s
    (500, 3_333, 16_665),               # rounded up, never under the floor...
    (1_000, None, BATCH_CAP_FLOOR),     # ...and a deployer who does not say the rate gets the floor
])
def test_the_cap_is_ten_trigger_intervals_of_input_with_a_floor(trigger_ms, rate, cap):
    settings = hardened("t", "d", "p", trigger_ms=trigger_ms, expected_rate=rate, catch_up_factor=10.0)
    assert settings.batch_cap == max(cap, BATCH_CAP_FLOOR)


def test_the_capped_job_drains_a_backlog_faster_than_input_arrives():
    # the hazard the rule answers: a cap under rate x trigger can never catch up, whatever the batches cost
    for rate in (100, 2_000, 20_000, 100_000):
        for trigger_ms in (100, 1_000, 5_000, 30_000):
            assert batch_cap(trigger_ms, rate, 10.0) >= 10 * rate * trigger_ms / 1000


def test_a_fixed_cap_wins_and_neither_profile_caps_by_itself():
    assert hardened("t", "d", "p", max_offsets_per_trigger=13_000, expected_rate=9_000,
                    catch_up_factor=10.0).batch_cap == 13_000
    assert hardened("t", "d", "p", expected_rate=9_000).batch_cap is None
    assert naive("t", "d", "p", expected_rate=9_000).batch_cap is None
    assert "max_offsets_per_trigger" not in SWITCHES


def test_the_rate_reaches_the_job_from_the_options_and_the_settings_document():
    assert from_args(["--profile", "hardened", "--topic", "t", "--deployment", "d", "--expected-rate", "4000",
                      "--trigger", "2s"]).batch_cap is None  # the rate alone caps nothing
    capped = {"expected_rate": 3_000, "trigger_ms": 1_000, "catch_up_factor": 10.0}
    assert resolve("hardened", capped).batch_cap == 30_000
    with pytest.raises(ValueError, match="expected_rate"):
        resolve("hardened", {"expected_rate": -1.0})


def test_an_arm_tells_its_job_the_workload_rate(tmp_path):
    from chaos.run import arm_config

    path = tmp_path / "x.yaml"
    path.write_text("""
name: x
description: d
incident: {file: 001-kafka-disconnects-tolerable-failures-bad-magic-metadata-exists.txt, error: e}
seed: 1
workload: {shape: uniform, keys: 10, rate: 4000}
job: {trigger: 2s}
phases: {steady: 5s, inject: 10s, recover: 10s}
faults: [{fault: network.down, target: kafka, duration: 5s}]
arms: {hardened: {targets: {lost: 0}}, naive: {targets: {lost: 0}}}
""")
    spec = load_experiment(path, 1.0)
    config = arm_config(spec, "hardened")
    assert config.settings["expected_rate"] == 4_000
    assert resolve("hardened", {**config.settings, "catch_up_factor": 10.0}).batch_cap == 80_000
    assert resolve("naive", arm_config(spec, "naive").settings).batch_cap is None
