"""junit.xml of one run: a testcase per experiment arm, for CI (docs/reports.md)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from . import facts
from .markup import _count
from .model import Run, Timeline, _anchor, _write_atomic, load_run
from .page import _did_not_survive, _discrimination, _survived_note, discrimination_line

# -- junit.xml -------------------------------------------------------------------------------------------------
# FAILED is a failure of the job under test; UNKNOWN (environment), HANG (no progress, so nothing could be judged)
# and NODATA (nothing measured) are errors: the test did not produce a judgement, and must not look green;
# INTERRUPTED is skipped: the run was cut short before the arm could finish; SKIPPED is skipped with its reason: the
# arm was not run (a fault that cannot act on the target, docs/targets.md).
JUNIT_ERRORS = {"UNKNOWN": "the environment failed (not a job failure)", "HANG": "the job made no progress at all",
                "NODATA": "nothing was measured"}


def _failed_checks(arm: dict, verdicts: Iterable[str]) -> str:
    wanted = set(verdicts)
    lines = [f"{c.get('name')}: expected {c.get('expected')}, measured {c.get('measured')}"
             for c in arm.get("checks") or [] if isinstance(c, dict) and c.get("verdict") in wanted]
    return "; ".join(lines)


def _arm_seconds(timeline: Timeline) -> float:
    span = timeline.span
    return round(span[1] - span[0], 3) if span else 0.0


def _junit_discrimination(suite: ET.Element, name: str, discrimination: dict) -> str | None:
    """The `<experiment>/discrimination` case: a failure when the suite requires discrimination and a job without
    the hardening passes every hardened outcome target, or none could be judged on it (inconclusive); skipped (with
    why) when waived, not run, or not required; passed when the control failed a hardened outcome target. Returns
    the counter it adds to, if any."""
    case = ET.SubElement(suite, "testcase", classname=name, name=f"{name}/discrimination", time="0.000")
    status = str(discrimination.get("status"))
    failed = [c for c in discrimination.get("failed") or [] if isinstance(c, dict)]
    properties = ET.SubElement(case, "properties")
    for key, value in (("status", status), ("required", str(bool(discrimination.get("required"))).lower()),
                       ("measured", discrimination.get("measured")), ("control", discrimination.get("control")),
                       ("failed_on", ", ".join(str(c.get("name")) for c in failed)),
                       ("waiver", discrimination.get("waiver"))):
        if value not in (None, ""):
            ET.SubElement(properties, "property", name=key, value=str(value))
    line = discrimination_line(discrimination)
    outcome = None
    if status in ("not_discriminating", "inconclusive") and discrimination.get("verdict") == "FAILED":
        ET.SubElement(case, "failure", message=str(discrimination.get("message") or line),
                      type=status.upper()).text = line
        outcome = "failures"
    elif status != "discriminating":
        ET.SubElement(case, "skipped", message=line)
        outcome = "skipped"
    out = [line] + [f"{c.get('verdict')} {c.get('name')}: expected {c.get('expected')}, measured "
                    f"{c.get('measured')}. {c.get('message') or ''}".rstrip()
                    for c in discrimination.get("checks") or [] if isinstance(c, dict)]
    out.append(f"report: index.html#{_anchor(name)}")
    ET.SubElement(case, "system-out").text = "\n".join(out)
    return outcome


def _properties(parent: ET.Element, values: list[tuple[str, str]]) -> ET.Element:
    properties = ET.SubElement(parent, "properties")
    for name, value in values:
        ET.SubElement(properties, "property", name=name, value=value)
    return properties


def _run_properties(run: Run) -> list[tuple[str, str]]:
    """The suite's properties: what was run (facts.run_properties) and the pre-release flaky list."""
    entries = facts.flaky(run)
    return facts.run_properties(run) + [("flaky_count", str(len(entries)))] + \
        ([("flaky", "; ".join(facts.flaky_line(e) for e in entries))] if entries else [])


def _junit_mutation(suite: ET.Element, mutation: dict, counts: dict[str, int], properties: ET.Element) -> None:
    from ..mutate import headline

    ET.SubElement(properties, "property", name="kill_rate", value=str(mutation.get("kill_rate")))
    ET.SubElement(properties, "property", name="claimed_kill_rate", value=str(mutation.get("claimed_kill_rate")))
    ET.SubElement(properties, "property", name="mutation", value=headline(mutation))
    for cell in mutation.get("cells") or []:
        case = ET.SubElement(suite, "testcase", classname=f"mutate.{cell.get('switch')}",
                             name=str(cell.get("experiment")), time="0.000")
        counts["tests"] += 1
        why = str(cell.get("why"))
        if cell.get("status") == "survived":
            counts["failures"] += 1
            ET.SubElement(case, "failure", type="SURVIVED",
                          message=f"{cell.get('experiment')} passes with {cell.get('switch')} off: {why}")
        elif cell.get("status") != "killed":
            counts["errors"] += 1
            ET.SubElement(case, "error", type="UNKNOWN", message=why)
        ET.SubElement(case, "system-out").text = f"{cell.get('status')}: {why}"


def write_junit(run_dir: Path) -> Path:
    run = load_run(Path(run_dir))
    suite_name = str(run.meta.get("suite") or run.dir.name)
    suites = ET.Element("testsuites", name=suite_name)
    suite = ET.SubElement(suites, "testsuite", name=suite_name, timestamp=run.started)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total = 0.0
    properties = _properties(suite, _run_properties(run))  # one <properties>, before the testcases
    mutation = run.results.get("mutation")
    if isinstance(mutation, dict):  # a mutate run: a case per mutant, green when the mutant is killed
        _junit_mutation(suite, mutation, counts, properties)
    for experiment in run.experiments if not isinstance(mutation, dict) else []:
        for arm in run.arms.get(str(experiment.get("name", "?")), []):
            seconds = _arm_seconds(arm.timeline)
            total += seconds
            case = ET.SubElement(suite, "testcase", classname=arm.experiment, name=arm.profile, time=f"{seconds:.3f}")
            counts["tests"] += 1
            _properties(case, facts.arm_properties(run, arm))
            verdict, data = arm.verdict, arm.data
            details = "\n".join(f"{c.get('verdict')} {c.get('name')}: expected {c.get('expected')}, measured "
                                f"{c.get('measured')}. {c.get('message') or ''}".rstrip()
                                for c in data.get("checks") or [] if isinstance(c, dict))
            if verdict == "FAILED":
                counts["failures"] += 1
                message = _failed_checks(data, ["FAILED"]) or "FAILED"
                ET.SubElement(case, "failure", message=message, type="FAILED").text = details
            elif verdict in JUNIT_ERRORS:
                counts["errors"] += 1
                message = _failed_checks(data, ["FAILED", "UNKNOWN", "HANG", "NODATA"])
                errors = "; ".join(str(e.get("message")) for e in arm.timeline.errors)
                message = f"{verdict}: {JUNIT_ERRORS[verdict]}" + (f" ({message})" if message else "") + \
                          (f"; {errors}" if errors else "")
                ET.SubElement(case, "error", message=message, type=verdict).text = details
            elif verdict == "SKIPPED":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=f"SKIPPED: {arm.skipped}")
            elif verdict == "INTERRUPTED":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message="INTERRUPTED: the run was cut short")
            out = [f"verdict {verdict}", f"recovery {facts.recovery(data)[0]}",
                   f"lost {_count(data.get('lost'))}", f"duplicated {_count(data.get('duplicated'))}"]
            if data.get("signature"):
                out.append(("control reproduced: " if data.get("role") == "control" else "signature: ")
                           + str(data["signature"]))
            elif data.get("role") == "control" and _survived_note(data):
                out.append(str(_survived_note(data)))
            elif data.get("role") == "control" and _did_not_survive(data):
                out.append(str(_did_not_survive(data)))
            out.append(f"report: index.html#{arm.anchor}")
            ET.SubElement(case, "system-out").text = "\n".join(out)
        discrimination = _discrimination(experiment)
        if discrimination is not None:
            outcome = _junit_discrimination(suite, str(experiment.get("name", "?")), discrimination)
            counts["tests"] += 1
            if outcome:
                counts[outcome] += 1
    for element in (suites, suite):
        for key, value in counts.items():
            element.set(key, str(value))
        element.set("time", f"{total:.3f}")
    ET.indent(suites)
    path = run.dir / "junit.xml"
    _write_atomic(path, ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n")
    return path


