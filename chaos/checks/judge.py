"""The loaders, the only I/O of the checks: read a stored run's files (docs/run-store.md), judge every arm and every
experiment's discrimination, write each arm's result.json, and return results.json's content. Judging the same
directory twice gives the same JSON: nothing here depends on the clock, the machine or the order a directory is
listed in. Whatever a check or a loader raises becomes an UNKNOWN check carrying the error; the run is still judged
and its results still written."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..errors import SpecError
from ..history import HistoryError, read_history
from ..spec import ExperimentSpec
from ..store import write_result
from ..verdicts import INTERRUPTED, worst
from .arm import judge_records, skipped_reason
from .discrimination import CONTROL, SUBJECT, complete_schedule, discriminate, discrimination_result
from .exactly_once import oracle_kind
from .logs import signature_ratio, watched_patterns
from .recovery import check_recovery_vs_control
from .registry import raised
from .timeline import Check, timeline


def read_json(path: Path) -> tuple[object | None, str]:
    """(value, why it is None)."""
    try:
        return json.loads(path.read_text(encoding="utf-8")), ""
    except FileNotFoundError:
        return None, f"no {path.name}"
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"{path.name} unreadable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"


def _unknown_arm(profile: str, role: str, name: str, message: str) -> dict:
    return {"profile": profile, "verdict": "UNKNOWN", "role": role, "recovery_s": None, "lost": None,
            "duplicated": None, "signature": None,
            "checks": [Check(name, "UNKNOWN", "a readable record of the arm", "unreadable", message).to_dict()]}


@dataclass(frozen=True)
class _ArmFiles:
    records: list
    oracle: Mapping[str, object] | None
    lineage: Mapping[str, object] | None
    summary: Mapping[str, object] | None
    missing: Mapping[str, str]


def _read_arm(arm_dir: Path) -> _ArmFiles | str:
    """An arm directory's parsed files, or why its history cannot be read."""
    history = arm_dir / "history.jsonl"
    if not history.is_file():
        return f"no {history.name}: the arm recorded nothing"
    try:
        records = read_history(history)
    except (HistoryError, OSError) as exc:
        return f"history unreadable: {exc}"
    oracle, oracle_why = read_json(arm_dir / "oracle.json")
    lineage, lineage_why = read_json(arm_dir / "lineage.json")
    summary, _ = read_json(arm_dir / "arm.json")
    if oracle is not None and not isinstance(oracle, Mapping):
        oracle, oracle_why = None, "oracle.json is not an object"
    if lineage is not None and not isinstance(lineage, Mapping):
        lineage, lineage_why = None, "lineage.json is not an object"
    return _ArmFiles(records, oracle, lineage, summary if isinstance(summary, Mapping) else None,
                     {"oracle": oracle_why, "lineage": lineage_why})


def judge_arm(arm_dir: str | Path, spec: ExperimentSpec, profile: str, run_status: str | None = None) -> dict:
    """Read one arm directory (history.jsonl, oracle.json, lineage.json, arm.json) and judge it; `run_status` is
    run.json's (an arm of an interrupted run may have been cut short)."""
    files = _read_arm(Path(arm_dir))
    if isinstance(files, str):
        return _unknown_arm(profile, spec.arm(profile).role, "history", files)
    return judge_records(files.records, spec, profile, oracle=files.oracle, lineage=files.lineage,
                         summary=files.summary, missing=files.missing, run_status=run_status)


def _guarded_arm(arm_dir: Path, spec: ExperimentSpec, profile: str, run_status: str | None = None) -> dict:
    """judge_arm; what it raises outside a check (reading, indexing the history) makes the arm UNKNOWN."""
    try:
        return judge_arm(arm_dir, spec, profile, run_status)
    except Exception as error:  # noqa: BLE001 - a broken judge is UNKNOWN, never a lost results.json
        check = raised("judge", error)
        return _unknown_arm(profile, spec.arm(profile).role, check.name, check.message)


def judge_discrimination(experiment_dir: str | Path, spec: ExperimentSpec) -> dict:
    """Read the control arm's files of one experiment and judge them by the hardened arm's targets
    (`discriminate`); not_run where the run has no control, or the spec no hardened targets."""
    experiment_dir = Path(experiment_dir)
    profiles = [arm.profile for arm in spec.arms]
    if CONTROL not in profiles:
        return discrimination_result(spec, [], not_run="the experiment has no control (naive) arm in this run")
    if SUBJECT not in profiles:
        return discrimination_result(spec, [], not_run="the experiment has no hardened arm: no targets to judge "
                                                       "the control by")
    if not (experiment_dir / CONTROL).is_dir():
        return discrimination_result(spec, [], not_run="the control (naive) arm was not run")
    files = _read_arm(experiment_dir / CONTROL)
    if isinstance(files, str):
        return discrimination_result(spec, [Check("history", "UNKNOWN", "a readable record of the control",
                                                  "unreadable", files)])
    reason = skipped_reason(files.records)
    if reason is not None:
        return discrimination_result(spec, [], not_run=f"the control (naive) arm was skipped: {reason}")
    subject_oracle, _ = read_json(experiment_dir / SUBJECT / "oracle.json")
    subject_kind = oracle_kind(subject_oracle) if isinstance(subject_oracle, Mapping) else "compare"
    return discriminate(files.records, spec, oracle=files.oracle, lineage=files.lineage, missing=files.missing,
                        subject_kind=subject_kind)


def _with_signature_ratio(experiment_dir: Path, spec: ExperimentSpec, arm: dict) -> dict:
    """A control that showed its incident by a log line also gets `signature_ratio` (chaos/checks/logs.py): the same
    line counted in the hardened arm's history. Left out where there is nothing to compare: no hardened arm in this
    run, or runs recorded before arms counted each other's signatures."""
    spec_arm = spec.arm(arm["profile"])
    logs = spec_arm.targets.logs
    if (spec_arm.role != "control" or spec_arm.expect != "incident" or logs is None or not logs.expected
            or not arm.get("signature") or not (experiment_dir / SUBJECT).is_dir()):
        return arm
    try:
        control = _read_arm(experiment_dir / arm["profile"])
        subject = _read_arm(experiment_dir / SUBJECT)
        if isinstance(control, str) or isinstance(subject, str):
            return arm
        watched = watched_patterns(subject.records)
        if watched is None:
            return arm
        check = signature_ratio(timeline(control.records), timeline(subject.records), watched, logs.expected)
    except Exception as error:  # noqa: BLE001 - guarded like every check
        check = raised("signature_ratio", error)
    checks = [*arm["checks"], check.to_dict()]
    verdict = arm["verdict"] if arm.get("interrupted") else worst([arm["verdict"], check.verdict])
    return {**arm, "checks": checks, "verdict": verdict}


def _with_control_recovery(experiment_dir: Path, spec: ExperimentSpec, arm: dict) -> dict:
    """The hardened arm also gets `recovery_vs_control` (chaos/checks/recovery.py) where its recovery target states
    a `control_margin` and the control ran the same faults to the end of its phases in this run: a pre-release
    run, which runs the controls the nightly leaves out. Left out otherwise (no figure of plain Spark to follow)."""
    target = spec.arm(SUBJECT).targets.recovery
    if (arm["profile"] != SUBJECT or arm.get("interrupted") or target is None or target.control_margin is None
            or not (experiment_dir / CONTROL).is_dir()):
        return arm
    try:
        control = _read_arm(experiment_dir / CONTROL)
        subject = _read_arm(experiment_dir / SUBJECT)
        if isinstance(control, str) or isinstance(subject, str) or skipped_reason(control.records) is not None:
            return arm
        if not complete_schedule(control.records, spec):
            return arm
        check = check_recovery_vs_control(timeline(subject.records), timeline(control.records), target)
    except Exception as error:  # noqa: BLE001 - guarded like every check
        check = raised("recovery_vs_control", error)
    if check is None:
        return arm
    return {**arm, "checks": [*arm["checks"], check.to_dict()], "verdict": worst([arm["verdict"], check.verdict])}


def _experiment_dirs(run_dir: Path, listed: object) -> list[Path]:
    """Experiments in run.json order, then any other directory with a spec.json (sorted); never reached: left out."""
    names = [n for n in listed if isinstance(n, str)] if isinstance(listed, list) else []
    found = [run_dir / n for n in dict.fromkeys(names) if n and "/" not in n and (run_dir / n).is_dir()]
    extra = sorted(p for p in run_dir.iterdir() if p.is_dir() and (p / "spec.json").is_file() and p not in found) \
        if run_dir.is_dir() else []
    return found + extra


def judge_run(run_dir: str | Path) -> dict:
    """Judge every arm of a stored run; write each arm's result.json; return results.json's content."""
    run_dir = Path(run_dir)
    run, _ = read_json(run_dir / "run.json")
    run = run if isinstance(run, Mapping) else {}
    status = run.get("status") if isinstance(run.get("status"), str) else "unknown"
    experiments: list[dict[str, Any]] = []
    for experiment_dir in _experiment_dirs(run_dir, run.get("experiments")):
        raw, why = read_json(experiment_dir / "spec.json")
        try:
            if raw is None:
                raise SpecError(f"{experiment_dir.name}/spec.json: (file): {why}; allowed: the spec.json a run "
                                "writes")
            spec = ExperimentSpec.from_dict(cast(Mapping[str, object], raw), where=f"{experiment_dir.name}/spec.json")
        except SpecError as exc:
            arms = [_unknown_arm(p.name, "control" if p.name == "naive" else "subject", "spec", str(exc))
                    for p in sorted(experiment_dir.iterdir()) if p.is_dir()]
            incident = raw.get("incident") if isinstance(raw, Mapping) else None
            discrimination = (discrimination_result(None, [Check("spec", "UNKNOWN", "a readable spec.json",
                                                                 "unreadable", str(exc))])
                              if (experiment_dir / CONTROL).is_dir() else
                              discrimination_result(None, [], not_run="the control (naive) arm was not run"))
        else:
            arms = [_guarded_arm(experiment_dir / arm.profile, spec, arm.profile, status)
                    for arm in spec.arms if (experiment_dir / arm.profile).is_dir()]
            incident = {"file": spec.incident.file, "error": spec.incident.error}
            try:
                discrimination = judge_discrimination(experiment_dir, spec)
            except Exception as error:  # noqa: BLE001 - a broken judge is UNKNOWN, never a lost results.json
                discrimination = discrimination_result(spec, [raised("discrimination", error)])
            arms = [_with_control_recovery(experiment_dir, spec, _with_signature_ratio(experiment_dir, spec, arm))
                    for arm in arms]
        for arm in arms:
            write_result(experiment_dir / arm["profile"], arm)
        # A required discrimination that fails (not_discriminating, not waived) fails the experiment, and so the
        # run: its verdict is the worst of the arms' and the discrimination's.
        verdicts = [a["verdict"] for a in arms] + ["FAILED"] * (discrimination["verdict"] == "FAILED")
        experiments.append({"name": experiment_dir.name, "incident": incident, "verdict": worst(verdicts),
                            "arms": arms, "discrimination": discrimination})
    verdict = worst(e["verdict"] for e in experiments)
    flaky = flaky_arms(experiments)
    if status == "interrupted":
        verdict = INTERRUPTED
    elif status != "completed":  # error, or a harness that never finished (running): the environment broke
        verdict = worst([verdict, "UNKNOWN"])
    results: dict[str, Any] = {"verdict": verdict, "status": status, "experiments": experiments, "flaky": flaky}
    rows = mutate_plan(run_dir)
    if rows is not None:  # a mutate run: its mutants are meant to fail; the run passes when every switch is killed
        from ..mutate import matrix

        results["mutation"] = matrix(results, rows)
        if status == "completed":
            switches = results["mutation"]["switches"].values()
            results["verdict"] = ("FAILED" if any(s["status"] == "survived" for s in switches)
                                  else "UNKNOWN" if any(s["status"] == "unknown" for s in switches) else "PASSED")
    return results


def mutate_plan(run_dir: Path) -> list[dict] | None:
    from ..mutate import read_plan

    return read_plan(run_dir)


_REPEAT = re.compile(r"\.r(\d+)$")


def flaky_arms(experiments: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Arms of repeated experiments (directories <name>.r1, <name>.r2, ...) whose verdicts differ between repeats."""
    seen: dict[tuple[str, str], list[str]] = {}
    for experiment in experiments:
        name = str(experiment["name"])
        if not _REPEAT.search(name):
            continue
        for arm in experiment["arms"]:
            seen.setdefault((_REPEAT.sub("", name), str(arm["profile"])), []).append(str(arm["verdict"]))
    return [{"experiment": name, "profile": profile, "verdicts": verdicts}
            for (name, profile), verdicts in sorted(seen.items()) if len(set(verdicts)) > 1]
