"""The steps of the checkpoint-damage tests, test_checkpoint_damage_query.py (the query's files) and
test_checkpoint_damage_state.py (the state store's): on the real stack, the hardened job, stopped, finds damage to
one kind of checkpoint file before Spark reads it, repairs it, goes on committing batches, and in the end loses and
duplicates nothing.

Each module has one stack, one hardened job and one workload, to keep it short: the workload is produced in the
background while, one kind after another, a step waits for two more committed batches, stops the job (SIGKILL of
its process group, or a graceful stop), damages one file of that kind with chaos.checkpoint_damage.corrupt (the
harness's own reading of the checkpoint, not the job's) and restarts the job. The module's last test drains and
judges the whole run with the oracle. Two modules, so pytest-xdist (`--dist loadfile`) runs them side by side.

After a SIGKILL the newest commit (and an offsets entry in flight) is almost always one no manifest recorded yet (the
manifest of a batch's commit is written inside the next batch), and the job rolls such a batch back unread, whether
or not it is damaged (job/repair_plan.py, UNPROVEN). So the offsets and commits entries are damaged after a
graceful stop only (SIGTERM: the job records its last commit), at the last committed batch, where only a check of
the content can find the damage. Damaged after a SIGKILL, they proved nothing more: the rollback of an unrecorded
batch is what every SIGKILL step's restart does anyway, and that it never reads the entries it drops is
tests/unit/test_integrity_plan.py's (the newest commit and the batch in flight count only when recorded).
"""
from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from chaos import checkpoint_damage, checkpoint_tools
from chaos.arm.job import ArmConfig, JobArm
from chaos.workload import WorkloadSpec
from infra.stack import Stack
from tests.integration.job_settings import OUTCOME_TRIGGER_MS

UNPROVEN = "not recorded in a manifest"  # job/repair_plan.py's reason for an entry it rolls back unread
# A method that certainly breaks each file: truncation breaks every JSON record, a zip's central directory and a
# changelog's stream; an SST is checked by its footer's magic number, so that is what is damaged there.
METHODS = {"sst": "footer"}
SEED = 20
FIRST_BATCHES_S = 150.0   # the stack's first job start (JVM, Kafka source) until 2 commits
NEXT_BATCHES_S = 60.0     # 2 more commits of a running job
# a snapshot of a committed version (every 5 versions, uploaded by the 15 s maintenance); under `make test` the zip
# step follows the first step directly (the changelog step is slow), so the first snapshot may still be on its way
SNAPSHOT_S = 120.0
RESTART_S = 120.0         # a restart, its repair, and a batch beyond what was committed before the kill


@dataclass
class Run:
    stack: Stack
    arm: JobArm
    stop: threading.Event
    producer: threading.Thread
    mark: int = -1                                    # the newest commit when the previous step ended
    damages: list[dict] = field(default_factory=list)  # what corrupt() did, plus the start that followed


def _commits(run: Run) -> list[int]:
    layout = checkpoint_tools.read_layout(run.stack.s3_client(direct=True), run.stack.info.bucket,
                                          run.arm.checkpoint_prefix)
    return sorted(layout.commits)


def _job_lines(path: Path, last: int = 12) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.startswith("job: ")]
    except OSError:
        return f"(no log at {path})"
    return "\n".join(lines[-last:]) or f"(no job: lines in {path})"


def _spark_error(path: Path) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    hits = [ln for ln in text if "Exception" in ln or "ERROR" in ln]
    return "\n".join(hits[-6:])


def _context(run: Run, kind: str) -> str:
    job = run.arm.job
    state = "no job" if job is None else f"job pid {job.pid} {'alive' if job.alive() else f'exited {job.returncode}'}"
    return (f"[{kind}] {state}; last job: lines of {job.log_path if job else '-'}:\n"
            f"{_job_lines(job.log_path) if job else ''}\nlast errors:\n{_spark_error(job.log_path) if job else ''}")


def _repair_lines(text: str) -> list[str]:
    """`job: integrity:` lines that report a repair (not a version verified intact, not a stop's bookkeeping)."""
    return [ln for ln in text.splitlines() if ln.startswith("job: integrity:") and not ln.endswith(" verified")
            and "was not recorded at the stop" not in ln]


def _journals(run: Run) -> list[str]:
    layout = checkpoint_tools.read_layout(run.stack.s3_client(direct=True), run.stack.info.bucket,
                                          run.arm.checkpoint_prefix)
    return [k for k in layout.bookkeeping if k.startswith("_integrity/rollbacks/") and k.endswith(".json")]


def _read_json(run: Run, key: str) -> dict:
    s3 = run.stack.s3_client(direct=True)
    response = s3.get_object(run.stack.info.bucket, f"{run.arm.checkpoint_prefix}/{key}")
    try:
        return json.loads(response.read())
    finally:
        response.close()
        response.release_conn()


def step_id(kind: str, stop: str) -> str:
    return kind if stop == "sigkill" else f"{kind}-after-graceful-stop"


def running_job(stack, tmp_path_factory, seed: int = SEED, duration_ms: int = 900_000) -> Iterator[Run]:
    """A module's `run` fixture: its hardened job started, its workload produced in the background (also
    test_missing_partition's)."""
    workload = WorkloadSpec(shape="zipf", keys=50, rate=100, duration_ms=duration_ms, seed=seed)
    arm = JobArm(stack, tmp_path_factory.mktemp("arm"), ArmConfig(profile="hardened", workload=workload, settings={
        "gap_ms": 3_000, "max_session_ms": 30_000, "watermark_ms": 2_000, "trigger_ms": OUTCOME_TRIGGER_MS}))
    arm.create_topic()
    stop = threading.Event()
    producer = threading.Thread(target=arm.produce, kwargs={"stop_event": stop}, daemon=True, name="producer")
    producer.start()
    arm.start_job()
    state = Run(stack, arm, stop, producer)
    try:
        yield state
    finally:
        stop.set()
        producer.join(60)
        if arm.job is not None and arm.job.alive():
            arm.job.stop(grace=10)


def _wait_for_batches(run: Run, kind: str, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        job = run.arm.job
        assert job is not None and job.alive(), f"the job died before {kind} was damaged\n{_context(run, kind)}"
        commits = _commits(run)
        if commits and commits[-1] >= run.mark + 2:
            return commits[-1]
        assert time.monotonic() < deadline, (f"no 2 more committed batches than {run.mark} within {timeout:.0f} s "
                                             f"before damaging {kind} (commits {commits[-3:]})\n{_context(run, kind)}")
        time.sleep(0.5)


def _wait_for_target(run: Run, kind: str, timeout: float) -> None:
    s3, bucket = run.stack.s3_client(direct=True), run.stack.info.bucket
    deadline = time.monotonic() + timeout
    while not checkpoint_damage.can_corrupt(s3, bucket, run.arm.checkpoint_prefix, kind, "newest"):
        assert run.arm.job.alive(), f"the job died waiting for a {kind} file\n{_context(run, kind)}"
        assert time.monotonic() < deadline, (f"no {kind} file of a committed version within {timeout:.0f} s "
                                             f"(commits up to {_commits(run)[-1:]})\n{_context(run, kind)}")
        time.sleep(1)


def damage_and_restart(run: Run, kind: str, stop: str) -> None:
    """One step: two more committed batches, the job stopped (`sigkill` or `graceful`), one file of `kind` damaged,
    the job restarted: it repairs the damage in one journaled repair, logged once, and commits a batch beyond."""
    arm = run.arm
    if arm.job is None or not arm.job.alive():  # an earlier kind ended the job: that test failed already
        arm.start_job()
    started = time.monotonic()
    _wait_for_batches(run, kind, FIRST_BATCHES_S if run.mark < 0 else NEXT_BATCHES_S)
    _wait_for_target(run, kind, SNAPSHOT_S)
    if stop == "sigkill":
        arm.job.signal(signal.SIGKILL)
        assert arm.job.wait(30) is not None, f"the job outlived SIGKILL by 30 s\n{_context(run, kind)}"
    else:
        code = arm.stop_job()
        assert code == 0, f"the graceful stop ended with exit {code}\n{_context(run, kind)}"
    before = _commits(run)
    journals_before = set(_journals(run))
    # After a graceful stop: the last committed batch's entry, which the stop recorded and a start reads.
    version = "newest" if stop == "sigkill" else before[-1]
    damaged = checkpoint_damage.corrupt(run.stack.s3_client(direct=True), run.stack.info.bucket,
                                       arm.checkpoint_prefix, kind=kind, version=version,
                                       method=METHODS.get(kind, "truncate"), seed=SEED)
    assert damaged["kind"] == kind, damaged
    job = arm.start_job()
    run.damages.append({**damaged, "log": str(job.log_path)})
    deadline = time.monotonic() + RESTART_S
    now = before
    while True:
        assert job.alive(), (f"the job exited (code {job.returncode}) after {damaged['file']} was damaged "
                             f"({damaged['method']})\n{_context(run, kind)}")
        now = _commits(run)
        if now and before and now[-1] > before[-1]:
            break
        assert time.monotonic() < deadline, (
            f"no batch beyond commit {before[-1:]} within {RESTART_S:.0f} s of the restart after {damaged['file']} "
            f"was damaged ({damaged['method']}); commits now {now[-3:]}\n{_context(run, kind)}")
        time.sleep(0.5)
    run.mark = now[-1]
    # The job found this damage and repaired it in one journaled repair, logged once.
    repairs = _repair_lines(job.log_path.read_text(errors="replace"))
    assert len(repairs) == 1, (f"{len(repairs)} repair lines after {damaged['file']} was damaged, wanted 1"
                               f"\n{_context(run, kind)}")
    new = sorted(set(_journals(run)) - journals_before)
    assert len(new) == 1, f"{len(new)} new repair journals ({new})\n{_context(run, kind)}"
    journal = _read_json(run, new[0])
    assert journal.get("status") == "done", f"{new[0]}: {journal.get('status')}\n{_context(run, kind)}"
    # Named as damaged, or (a SIGKILL between a commit and its manifest) its whole batch rolled back for that
    # unrecorded commit: then the damaged offsets or commits entry went with the batch, and nothing read it.
    dropped = kind in ("offsets", "commits") and int(damaged["file"].rsplit("/", 1)[1]) in journal.get(
        "drop_batches", [])
    assert damaged["file"] in journal.get("damaged", {}) or dropped, (
        f"the repair did not name {damaged['file']} as damaged, nor drop its batch: {journal.get('damaged')}, "
        f"dropped batches {journal.get('drop_batches')}\n{_context(run, kind)}")
    why = journal["damaged"].get(damaged["file"], f"its batch was rolled back: {journal['damaged']}")
    if stop == "graceful":
        assert UNPROVEN not in why, (f"{damaged['file']} was recorded at the graceful stop, yet the job rolled it "
                                     f"back as unrecorded: {why}\n{_context(run, kind)}")
    # Spark never saw the damage: the repair came first, and no query failed after it.
    failed = [ln for ln in job.log_path.read_text(errors="replace").splitlines()
              if ln.startswith(("job: query failed", "job: stopped", "job: cannot start"))]
    assert not failed, f"the query failed after the repair: {failed[:2]}\n{_context(run, kind)}"
    print(f"{kind} ({stop}): why: {why}")
    print(f"{kind}: damaged {damaged['file']} ({damaged['method']}, {damaged['size_before']} -> "
          f"{damaged['size_after']} bytes); repaired: {repairs[0]}; step took {time.monotonic() - started:.0f} s")


def judge_whole_run(run: Run) -> None:
    """A module's last test: the job drained and stopped; nothing lost, duplicated or wrong, every checkpoint file a
    kind the harness knows, one repair line per damage."""
    arm = run.arm
    assert run.damages, "no damage was done (every kind's test failed before its damage)"
    if arm.job is None or not arm.job.alive():
        arm.start_job()
    run.stop.set()
    run.producer.join(60)
    assert not run.producer.is_alive(), "the producer did not stop within 60 s"
    drained = arm.drain()
    code = arm.stop_job()
    verdict = arm.judge()
    oracle = verdict["oracle"]
    last = _job_lines(arm.job.log_path)
    assert drained, f"the drain did not finish (job exit {code}); last job: lines:\n{last}"
    assert oracle["lost"] == 0, f"{oracle['lost']} sessions lost: {oracle['lost_examples'][:3]}\n{last}"
    assert oracle["duplicated"] == 0, (f"{oracle['duplicated']} sessions duplicated: "
                                       f"{oracle['duplicated_examples'][:3]}\n{last}")
    assert oracle["wrong"] == 0, f"{oracle['wrong']} sessions wrong: {oracle['wrong_examples'][:3]}\n{last}"
    # Every file of the checkpoint is one the harness knows how to damage, or one it must leave alone.
    layout = checkpoint_tools.read_layout(run.stack.s3_client(direct=True), run.stack.info.bucket,
                                          arm.checkpoint_prefix)
    print("checkpoint at the end: " + ", ".join(f"{kind} {len(layout.files(kind))}"
                                                for kind in checkpoint_tools.KINDS)
          + f", temporary {len(layout.temporary)}, bookkeeping {len(layout.bookkeeping)}, other {layout.other}")
    assert layout.other == [], f"files the harness cannot classify (so never damages): {layout.other[:10]}"
    logs = sorted(Path(run.stack.log_dir).glob("job-*.log"))
    repairs = {str(path): _repair_lines(path.read_text(errors="replace")) for path in logs}
    total = sum(len(lines) for lines in repairs.values())
    by_damage = "\n".join(f"{d['kind']} {d['file']} ({d['method']}): {repairs.get(d['log'])}" for d in run.damages)
    assert total == len(run.damages), f"{total} repair lines for {len(run.damages)} damages:\n{by_damage}"
