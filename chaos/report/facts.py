"""What a run was and how to run it again: seed, scale, backend, commit, wall-clock times, the rerun commands,
recovery and flakiness. One source for the HTML, junit.xml and the console, so they say the same thing."""
from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime

from .model import Arm, Run, _number

_REPEAT = re.compile(r"\.r\d+$")  # repeats of a suite are <name>.r1, <name>.r2 (chaos/run.py experiment_dirs)


def utc(wall: object) -> str:
    """A history's `wall` (ISO 8601) or run.json's `started` as "2026-11-23 08:51:53.281 UTC"; "" when absent."""
    if not isinstance(wall, str) or not wall:
        return ""
    try:
        moment = datetime.fromisoformat(wall)
    except ValueError:
        return wall
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond // 1000:03d}"
    return text + " UTC"


def recovery(data: dict) -> tuple[str, bool]:
    """(text, not_recovered): "6.4 s"; "not recovered" when the recovery check failed without a time (the job
    never became healthy again); "–" when there is no recovery to measure (no recovery target, no fault healed)."""
    seconds = _number(data.get("recovery_s"))
    if seconds is not None:
        return f"{seconds:.1f} s", False
    if any(isinstance(c, dict) and c.get("name") == "recovery" and c.get("verdict") == "FAILED"
           for c in data.get("checks") or []):
        return "not recovered", True
    return "–", False


def failing_checks(data: dict) -> list[dict]:
    """The arm's checks that did not pass (FAILED first, then UNKNOWN and the rest), in the checkers' order."""
    checks = [c for c in data.get("checks") or [] if isinstance(c, dict) and c.get("verdict") != "PASSED"]
    return sorted(checks, key=lambda c: c.get("verdict") != "FAILED")


def commit(run: Run) -> str:
    """The harness commit run.json recorded (chaos/run.py), or "unknown" for runs made before it was recorded."""
    value = run.meta.get("commit")
    return str(value) if value else "unknown"


def seed(arm: Arm) -> int | None:
    value = arm.spec.get("seed")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def spec_name(arm: Arm) -> str:
    """The experiment's name to give `chaos run` (a repeat's directory <name>.r2 runs <name>)."""
    return str(arm.spec.get("name") or _REPEAT.sub("", arm.experiment))


def rerun_command(run: Run, target: str | None = None) -> str:
    """`chaos rerun RUN_DIR [EXPERIMENT[/ARM]]`: reruns exactly what the stored run ran (its spec.json, scale, seed).
    A report built through the `latest` link names the run it points to: `latest` moves with the next run."""
    path = run.dir
    if path.is_symlink():
        path = path.parent / path.resolve().name
    return shlex.join(["chaos", "rerun", str(path)] + ([target] if target else []))


def run_command(run: Run, arm: Arm) -> str:
    """The equivalent `chaos run` of one arm: the experiment by name, with the stored seed, scale and backend.
    Equivalent while experiments/NAME.yaml is unchanged since the run; `chaos rerun` uses the stored spec.json."""
    words = ["chaos", "run", spec_name(arm)]
    if seed(arm) is not None:
        words += ["--seed", str(seed(arm))]
    scale = run.meta.get("scale", arm.spec.get("scale"))
    if scale is not None:
        words += ["--scale", str(scale)]
    words += ["--backend", str(run.meta.get("backend") or "local"), "--arms", arm.profile]
    return shlex.join(words)


def started_command(run: Run) -> str:
    """The command line the run was started with (run.json `argv`), or "" when not recorded."""
    argv = run.meta.get("argv")
    return shlex.join(["chaos", *map(str, argv)]) if isinstance(argv, list) and argv else ""


def run_properties(run: Run) -> list[tuple[str, str]]:
    """The run's facts as (name, value): junit <properties> of the suite and the page's run table."""
    seeds = sorted({s for arms in run.arms.values() for a in arms if (s := seed(a)) is not None})
    facts = [("suite", str(run.meta.get("suite") or "?")), ("backend", str(run.meta.get("backend") or "?")),
             ("scale", str(run.meta.get("scale", "?"))), ("seeds", ", ".join(map(str, seeds)) or "?"),
             ("commit", commit(run)), ("started", utc(run.started) or "?"),
             ("repeat", str(run.meta.get("repeat", 1))), ("rerun", rerun_command(run))]
    if started_command(run):
        facts.append(("command", started_command(run)))
    return facts


def arm_properties(run: Run, arm: Arm) -> list[tuple[str, str]]:
    """An arm's facts as (name, value): junit <properties> of its testcase."""
    data = arm.data
    text, not_recovered = recovery(data)
    figures = [("verdict", arm.verdict), ("seed", str(seed(arm)) if seed(arm) is not None else "?"),
               ("scale", str(run.meta.get("scale", arm.spec.get("scale", "?")))),
               ("backend", str(run.meta.get("backend") or "?")), ("commit", commit(run)),
               ("started", utc(arm.timeline.first_wall) or "?"),
               ("recovery_s", "" if _number(data.get("recovery_s")) is None else str(data.get("recovery_s"))),
               ("recovered", "false" if not_recovered else "true" if text != "–" else "not applicable"),
               ("lost", "" if _number(data.get("lost")) is None else str(int(data["lost"]))),
               ("duplicated", "" if _number(data.get("duplicated")) is None else str(int(data["duplicated"]))),
               ("rerun", rerun_command(run, f"{arm.experiment}/{arm.profile}")),
               ("run_command", run_command(run, arm))]
    repeated = next((e for e in flaky(run) if e.get("experiment") == spec_name(arm)
                     and e.get("profile") == arm.profile), None)
    if repeated is not None:
        figures.append(("flaky", ", ".join(map(str, repeated.get("verdicts") or []))))
    for fault in arm.timeline.faults:
        figures.append((f"fault.F{fault.index}", f"{fault.name} on {fault.target}: injected "
                        f"{utc(fault.start_wall) or '?'}, healed {utc(fault.end_wall) or 'never'}"))
    return [(k, v) for k, v in figures if v != ""]


def flaky(run: Run) -> list[dict]:
    """results.json `flaky` (chaos/checks/judge.py flaky_arms): arms of a repeated suite whose verdicts differ."""
    return [f for f in run.results.get("flaky") or [] if isinstance(f, dict)]


def flaky_line(entry: dict) -> str:
    verdicts = entry.get("verdicts") or []
    return (f"{entry.get('experiment')} / {entry.get('profile')}: "
            f"{', '.join(map(str, verdicts))} over {len(verdicts)} repeats")


def flaky_lines(results: dict) -> list[str]:
    """The console's flaky lines for results.json (chaos run, chaos check): one per flaky arm, none when none."""
    entries = [f for f in results.get("flaky") or [] if isinstance(f, dict)]
    if not entries:
        return []
    return [f"FLAKY ({len(entries)} arm{'s' if len(entries) != 1 else ''} whose verdicts differ between repeats):"] + \
        [f"FLAKY      {flaky_line(e)}" for e in entries]
