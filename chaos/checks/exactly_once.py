"""lost and duplicated: what oracle.json counts (chaos/oracle.py) against the bounds: sessions (compare) or
acknowledged events (coverage); output with wrong fields fails `lost`, output nobody sent fails `duplicated`."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from .base import CheckDef, ControlData, settle, unjudged
from .timeline import Check, Timeline, num


def count_of(oracle: Mapping[str, object], key: str) -> int | None:
    value = oracle.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def oracle_kind(oracle: Mapping[str, object]) -> str:
    """compare (event-time profiles: sessions) or coverage (processing time: acknowledged events)."""
    return "coverage" if "acked" in oracle or "wrong_counts" in oracle else "compare"


def check_lost(oracle: Mapping[str, object] | None, limit: int, missing: str = "no oracle.json") -> Check:
    return oracle_check("lost", oracle, limit, missing)


def check_duplicated(oracle: Mapping[str, object] | None, limit: int, missing: str = "no oracle.json") -> Check:
    return oracle_check("duplicated", oracle, limit, missing)


# The oracle's other findings, and the check they fail: output with wrong fields means events of it were lost
# (or counted twice into it); output nobody sent is extra, like a duplicate.
_EXTRA = {("lost", "compare"): (("wrong", "emitted with wrong fields"),),
          ("lost", "coverage"): (("wrong_counts", "with a count that does not match the ledger"),),
          ("duplicated", "compare"): (("unexpected", "emitted that no event made"),),
          ("duplicated", "coverage"): (("unknown", "events covered that the ledger never acknowledged"),)}


def judging_note(oracle: Mapping[str, object]) -> str:
    """What judging cost (oracle.json's `judging`, chaos/judging.py), or nothing for oracle.json written before it."""
    judging = oracle.get("judging")
    if not isinstance(judging, Mapping):
        return ""
    events, seconds, peak = judging.get("events"), judging.get("seconds"), judging.get("peak_rss_mb")
    if not isinstance(events, int) or not isinstance(seconds, (int, float)) or not isinstance(peak, (int, float)):
        return ""
    of = " (the process's)" if judging.get("peak_rss_of") == "process" else ""
    return f"; judged {events:,} events in {seconds:g} s, peak {peak:g} MB resident{of}"


def oracle_check(name: str, oracle: Mapping[str, object] | None, limit: int, missing: str) -> Check:
    expected = f"<= {limit}"
    if oracle is None:
        return Check(name, "NODATA", expected, "no data", f"{missing}: the job's output was not judged")
    value = count_of(oracle, name)
    if value is None:
        return Check(name, "NODATA", expected, "no data", f"oracle.json has no {name} count")
    kind = oracle_kind(oracle)
    unit = "sessions" if kind == "compare" else "acknowledged events"
    extras = [(n, key, what) for key, what in _EXTRA[(name, kind)] if (n := count_of(oracle, key))]
    measured = num(value) + "".join(f" (+{n} {key})" for n, key, _ in extras)
    notes = "" if oracle.get("drained") is not False else "; the drain did not finish (sessions still open count " \
                                                          "as lost)"
    if copies := count_of(oracle, "topic_duplicates"):  # chaos/topic_audit.py: the input, not the job
        notes += f"; the topic held {copies} event copies beyond the first (the producer's), counted as input"
    if landed := count_of(oracle, "failed_landed"):  # deliveries the producer gave up on that the broker had stored
        notes += f"; {landed} deliveries the producer gave up on were in the topic, counted as input"
    notes += judging_note(oracle)
    if value > limit:
        return Check(name, "FAILED", expected, measured, f"{value} {unit} {name} (oracle.json){notes}")
    if extras:
        said = ", ".join(f"{n} {what}" if key == "unknown" else f"{n} sessions {what}" for n, key, what in extras)
        return Check(name, "FAILED", expected, measured, f"{value} {unit} {name}, but {said} (oracle.json){notes}")
    return Check(name, "PASSED", expected, measured, f"{value} {unit} {name} (oracle.json){notes}")


def control_oracle(name: str, data: ControlData, oracle: Mapping[str, object] | None, limit: int, missing: str,
                    subject_kind: str) -> Check:
    check = oracle_check(name, oracle, limit, missing)
    if oracle is not None and check.verdict != "NODATA" and oracle_kind(oracle) != subject_kind:
        units = {"compare": "sessions", "coverage": "acknowledged events"}
        if limit > 0:
            return unjudged(check, f"the hardened bound ({limit}) counts {units[subject_kind]}, the control's "
                                    f"oracle counts {units[oracle_kind(oracle)]}: only a bound of 0 means the same "
                                    "in both")
        check = dataclasses.replace(check, message=f"{check.message}; the control's oracle counts "
                                                   f"{units[oracle_kind(oracle)]}, not {units[subject_kind]}: a "
                                                   "bound of 0 means the same for both")
    why = None if data.complete else f"{data.incomplete()}; its output was not drained and read back to the end"
    return settle(check, data, pass_unless=why, fail_unless=why)


def late_rows(tl: Timeline) -> int:
    """Input rows the job dropped behind its watermark over the arm (the samples' running `late_rows`), 0 if none."""
    counts = [s.get("late_rows") for s in tl.samples]
    return max((n for n in counts if isinstance(n, int) and not isinstance(n, bool)), default=0)


def with_late_rows(check: Check, tl: Timeline, watermark_s: float | None) -> Check:
    """A failed `lost` says when the job itself dropped input as late: events that reached the job later than its
    watermark allows (one partition held back while the others moved event time on) are lost by design, not by a
    fault of the job's recovery, and the remedy is a watermark that covers that delay."""
    late = late_rows(tl)
    if check.verdict != "FAILED" or late <= 0:
        return check
    bound = f" of {watermark_s:g} s" if watermark_s is not None else ""
    return dataclasses.replace(check, message=f"{check.message}; the job dropped {late:,} input rows behind its "
                                              f"watermark{bound} (Spark's numRowsDroppedByWatermark): they reached "
                                              "it later than the watermark allows")


LOST = CheckDef("lost", "lost", lambda arm, limit: with_late_rows(check_lost(arm.oracle, limit,
                                                                             arm.why_missing("oracle")),
                                                                  arm.tl, arm.spec.job.watermark),
                lambda data, limit: control_oracle("lost", data, data.oracle, limit, data.why_missing("oracle"),
                                                   data.subject_kind))
DUPLICATED = CheckDef("duplicated", "duplicated",
                      lambda arm, limit: check_duplicated(arm.oracle, limit, arm.why_missing("oracle")),
                      lambda data, limit: control_oracle("duplicated", data, data.oracle, limit,
                                                         data.why_missing("oracle"), data.subject_kind))
