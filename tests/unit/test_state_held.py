"""The state an arm held: peaks of the state store's own metrics and the checkpoint's bytes over its samples, the line
that shows them, and its place in an arm's result."""
from __future__ import annotations

from chaos.state_held import describe, peak_state, size


def sample(**fields):
    return {"type": "sample", **fields}


def test_each_peak_is_the_largest_sample_of_its_own_measure():
    samples = [sample(state_rows=10, state_sst_bytes=0, state_memory_bytes=900, checkpoint_bytes=None),
               sample(state_rows=1_000_000, state_sst_bytes=1_100_000_000, state_memory_bytes=300,
                      checkpoint_bytes=2_000_000_000),
               sample(state_rows=5, state_sst_bytes=2_000, state_memory_bytes=None, checkpoint_bytes=1_000)]
    assert peak_state(samples) == {"rows": 1_000_000, "sst_bytes": 1_100_000_000, "memory_bytes": 900,
                                   "checkpoint_bytes": 2_000_000_000}


def test_a_measure_no_sample_took_is_none_not_zero():
    old_history = [sample(state_rows=3, state_bytes=4_000, checkpoint_bytes=12)]  # before sst/memory were recorded
    assert peak_state(old_history) == {"rows": 3, "sst_bytes": None, "memory_bytes": None, "checkpoint_bytes": 12}
    assert peak_state([]) == dict.fromkeys(("rows", "sst_bytes", "memory_bytes", "checkpoint_bytes"))
    assert peak_state([sample(state_rows=True)])["rows"] is None  # a bool is no count


def test_sizes_read_in_binary_units():
    assert [size(v) for v in (None, 0, 1023, 1024, 46_080, 1_100_000_000, 3 * 2**40)] == \
        ["?", "0 B", "1023 B", "1 KiB", "45 KiB", "1.02 GiB", "3 TiB"]


def test_the_line_says_what_was_measured_and_nothing_else():
    held = {"rows": 1_000_000, "sst_bytes": 1_100_000_000, "memory_bytes": 1_400_000_000,
            "checkpoint_bytes": 2_362_232_012}
    assert describe(held) == "state 1.02 GiB SST, 1,000,000 rows, 1.3 GiB in memory; checkpoint 2.2 GiB"
    assert describe({**held, "memory_bytes": None, "checkpoint_bytes": None}) == "state 1.02 GiB SST, 1,000,000 rows"
    assert describe({"rows": None, "sst_bytes": None, "memory_bytes": None, "checkpoint_bytes": 5}) == \
        "state not measured; checkpoint 5 B"
    assert describe(dict.fromkeys(held)) is None and describe(None) is None

