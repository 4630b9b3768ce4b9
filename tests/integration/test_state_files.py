"""The readers a restart loads state with (infra/state_files.py: RocksDB's SstFileReader with every block checksum,
Spark's own changelog reader), on real state files of a RocksDB state store (tests/fixtures/state_files): intact ones
read whole, and a bit flipped in an SST's data block, a truncated SST, a truncated changelog and a bit flipped in a
changelog are each caught. No stack: a JVM on the jars of this venv's pyspark (compiled once, then cached)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chaos.checkpoint_tools import SST_MAGIC, parse_listing, read_what_a_restart_loads
from chaos.checks.lineage import check_lineage
from infra.state_files import read_state_files

pytestmark = pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK: javac is needed to compile the reader")

FILES = Path(__file__).resolve().parents[1] / "fixtures" / "state_files"
SST = (FILES / "000008.sst").read_bytes()
CHANGELOG = (FILES / "5.changelog").read_bytes()


def flipped(data: bytes, at: int, bit: int = 0x04) -> bytes:
    damaged = bytearray(data)
    damaged[at] ^= bit
    return bytes(damaged)


def test_intact_and_damaged_state_files_as_a_restart_reads_them():
    assert SST[-8:] == SST_MAGIC  # the footer the harness checked alone before: intact in the bit-flipped copy too
    answers = read_state_files([
        ("sst", "intact.sst", SST),
        ("sst", "data-block-bit.sst", flipped(SST, 20)),
        ("sst", "truncated.sst", SST[:-100]),
        ("changelog", "intact.changelog", CHANGELOG),
        ("changelog", "truncated.changelog", CHANGELOG[:-30]),
        ("changelog", "bit.changelog", flipped(CHANGELOG, len(CHANGELOG) // 2, 0x10)),
    ])
    assert answers["intact.sst"] is None and answers["intact.changelog"] is None
    assert "block checksum mismatch" in str(answers["data-block-bit.sst"])
    assert "Bad table magic number" in str(answers["truncated.sst"])
    assert "EOFException" in str(answers["truncated.changelog"])
    assert answers["bit.changelog"] is not None


class _Listed:
    def __init__(self, key: str, size: int):
        self.key, self.size, self.etag = key, size, ""


def test_the_lineage_check_fails_on_a_bit_flipped_in_a_data_block_the_footer_check_passes():
    """The harness's reading of a checkpoint (one partition, snapshot 3 and changelogs 4..5 for state version 5)
    with the real readers: intact it passes; with a bit flipped in the SST or the changelog damaged it fails."""
    import io
    import json
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("metadata", "v1\n" + json.dumps({"sstFiles": [
            {"dfsSstFileName": "000008-a.sst", "sizeBytes": len(SST)}]}))
    snapshot = buffer.getvalue()

    def lineage_with(sst: bytes, changelog: bytes) -> dict:
        objects = {"c/metadata": b'{"id":"q"}', "c/offsets/3": b'v1\n{}\n{"t":{"0":1}}', "c/offsets/4":
                   b'v1\n{}\n{"t":{"0":2}}', "c/commits/4": b'v1\n{"nextBatchWatermarkMs":0}',
                   "c/state/0/0/3.zip": snapshot, "c/state/0/0/SSTs/000008-a.sst": sst,
                   "c/state/0/0/4.changelog": CHANGELOG, "c/state/0/0/5.changelog": changelog}
        layout = parse_listing([_Listed(k, len(v)) for k, v in objects.items()], "c")
        content = read_what_a_restart_loads(layout, lambda key: objects[f"c/{key}"], read_state_files)
        return {"metadata": True, "offsets": [3, 4], "commits": [4], "content": content,
                "state": {"0/0": {"snapshots": [3], "changelogs": [4, 5]}}}

    intact = check_lineage(lineage_with(SST, CHANGELOG))
    assert intact.verdict == "PASSED" and "3 SSTs and changelogs read whole" in intact.message
    bit = check_lineage(lineage_with(flipped(SST, 20), CHANGELOG))
    assert bit.verdict == "FAILED" and "state/0/0/SSTs/000008-a.sst: RocksDBException: block checksum mismatch" \
        in bit.message
    torn = check_lineage(lineage_with(SST, CHANGELOG[:-30]))
    assert torn.verdict == "FAILED" and "state/0/0/5.changelog: EOFException" in torn.message
