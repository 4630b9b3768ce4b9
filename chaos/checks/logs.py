"""logs: each expected pattern matched (from the inject phase on, at least min_matches lines), no forbidden one
anywhere."""
from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence

from ..spec import ExperimentSpec, Logs
from .base import CheckDef, ControlData, settle, unjudged
from .timeline import Check, Timeline, time_of

SIGNATURE_CHARS = 120


def check_logs(tl: Timeline, target: Logs) -> Check:
    expected = "; ".join([f"expected: {' , '.join(target.expected)}"] * bool(target.expected)
                         + [f"forbidden: {' , '.join(target.forbidden)}"] * bool(target.forbidden))
    # An expected signature is evidence of a fault's effect, so only lines from the inject phase on count (a first
    # micro-batch of 15-20 s "falls behind" in every warm-up); a forbidden one counts wherever it shows.
    since = evidence_start(tl)
    counts = {pattern: match_count(tl.logs, pattern, since) for pattern in target.expected}
    counts.update({pattern: match_count(tl.logs, pattern) for pattern in target.forbidden})
    missing = [p for p in target.expected if counts[p] < target.min_matches]
    present = [p for p in target.forbidden if counts[p]]
    measured = "; ".join(
        [f"expected matched {len(target.expected) - len(missing)}/{len(target.expected)} "
         f"({sum(counts[p] for p in target.expected)} lines)"] * bool(target.expected)
        + [f"forbidden matched {len(present)}/{len(target.forbidden)}"] * bool(target.forbidden))
    if present:
        first = next(r for r in tl.logs if r.get("signature") in present)
        return Check("logs", "FAILED", expected, measured,
                     f"forbidden {first.get('signature')!r} matched {first.get('source')}:{first.get('line')}: "
                     f"{trim(str(first.get('text', '')), str(first.get('signature')))}")
    if not tl.logs and not any(j.get("event") == "started" for j in tl.jobs):
        return Check("logs", "NODATA", expected, "no data", "no job log was watched: the job never started")
    unread = unread_logs(tl)
    if unread and (target.forbidden or missing):  # a line it holds could be a forbidden or a missing expected one
        return Check("logs", "NODATA", expected, f"{measured}; {len(unread)} job log(s) never read",
                     f"the log of a started driver was never read ({', '.join(unread[:3])}): no line of it was "
                     "matched, forbidden or expected")
    if missing:
        if counts[missing[0]]:
            return Check("logs", "FAILED", expected, measured, f"expected {missing[0]!r} matched {counts[missing[0]]} "
                         f"line(s), fewer than {target.min_matches}")
        return Check("logs", "FAILED", expected, measured, f"no log line matched expected {missing[0]!r}")
    return Check("logs", "PASSED", expected, measured,
                 "every expected signature matched" + (" and no forbidden one" if target.forbidden else "")
                 if target.expected else "no forbidden signature matched")


# A control's log line stands for its incident only when it logs that line this many times as often as the hardened
# arm of the same experiment does under the same faults (any number of times when the hardened arm logs it never).
SIGNATURE_RATIO = 3.0


def control_signatures(spec: ExperimentSpec) -> list[str]:
    """The expected log signatures of the experiment's controls that must reproduce an incident."""
    return [p for arm in spec.arms if arm.role == "control" and arm.expect == "incident" and arm.targets.logs
            for p in arm.targets.logs.expected]


def signature_ratio(control: Timeline, subject: Timeline, watched: set[str], patterns: Sequence[str]) -> Check:
    """The control's signatures against the hardened arm's count of the same lines over the same phases: a line
    both jobs log is no evidence of the incident, whatever else fails."""
    expected = f"control logs each signature >= {SIGNATURE_RATIO:g}x as often as the hardened arm"
    rows = []
    for pattern in patterns:
        if pattern not in watched:
            return Check("signature_ratio", "NODATA", expected, "not counted",
                         f"the hardened arm's scanner did not look for {pattern!r}")
        mine = match_count(control.logs, pattern, evidence_start(control))
        theirs = match_count(subject.logs, pattern, evidence_start(subject))
        rows.append((pattern, mine, theirs))
    measured = "; ".join(f"{mine} vs {theirs} lines" for _, mine, theirs in rows)
    for pattern, mine, theirs in rows:
        if mine < SIGNATURE_RATIO * theirs or mine == 0:
            return Check("signature_ratio", "FAILED", expected, measured,
                         f"the hardened arm logs {pattern!r} too ({theirs} lines against the control's {mine}): "
                         "the line is no evidence of the incident")
    return Check("signature_ratio", "PASSED", expected, measured,
                 "the hardened arm logs the control's signatures " + (
                     "never" if all(t == 0 for _, _, t in rows) else f"under 1/{SIGNATURE_RATIO:g} as often"))


def watched_patterns(records: Sequence[Mapping[str, object]]) -> set[str] | None:
    """The signatures an arm's scanner looked for (its `watch` record), None for runs recorded before it existed."""
    found: set[str] | None = None
    for record in records:
        patterns = record.get("patterns")
        if record.get("type") == "watch" and isinstance(patterns, list):
            found = (found or set()) | {str(p) for p in patterns}
    return found


def unread_logs(tl: Timeline) -> list[str]:
    """The logs of started drivers (their `started` records' `log`) that the scanner never read: a log missing when
    it looked, or never looked at. A history recorded before the scanner recorded what it read (no `watch` record
    with records_reads) has none: those runs keep the judgement they had, every started log taken as read."""
    if not any(w.get("records_reads") for w in tl.watches):
        return []
    read = {str(w.get("read")) for w in tl.watches if w.get("read") is not None}
    started = [str(j["log"]) for j in tl.jobs if j.get("event") == "started" and j.get("log")]
    return [log for log in dict.fromkeys(started) if log not in read]


def evidence_start(tl: Timeline) -> float:
    """History time from which an expected log signature counts: the start of the inject phase (never, if the arm
    did not get there)."""
    window = tl.window("inject")
    return window[0] if window is not None else math.inf


def match_count(logs: Sequence[Mapping[str, object]], pattern: str, since: float | None = None) -> int:
    """Lines that matched `pattern`, over every source: each record's `count` is its source's running total (the
    first matches are recorded one by one, later ones as tallies); records without one count one line each.
    With `since`, only lines recorded at or after that history time: a source's running total then minus its
    total before."""
    per_source: dict[str, int] = {}
    before: dict[str, int] = {}
    for record in logs:
        if record.get("signature") != pattern:
            continue
        source = str(record.get("source"))
        count = record.get("count")
        running = count if isinstance(count, int) and not isinstance(count, bool) else per_source.get(source, 0) + 1
        per_source[source] = max(per_source.get(source, 0), running)
        if since is not None and time_of(record) < since:
            before[source] = per_source[source]
    return sum(total - before.get(source, 0) for source, total in per_source.items())


def trim(text: str, pattern: str | None = None, limit: int = SIGNATURE_CHARS) -> str:
    """One line of at most ~limit characters; a long one is cut around the pattern's match."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    start, keep = 0, 0
    if pattern:
        try:
            match = re.search(pattern, text)
        except re.error:
            match = None
        if match:
            start = max(0, min(match.start() - limit // 4, len(text) - limit))
            keep = match.start()
    if start > 0:  # begin at a word, unless that would cut into the match
        space = text.find(" ", start, keep)
        start = space + 1 if space >= 0 else start
    end = min(len(text), start + limit)
    if end < len(text):
        space = text.rfind(" ", start + limit // 2, end + 1)
        end = space if space > 0 else end
    return ("…" if start > 0 else "") + text[start:end] + ("…" if end < len(text) else "")


def control_logs(data: ControlData, target: Logs, watched: set[str]) -> Check:
    """Only the patterns the control's own log scanner watched have records in its history (its own targets'
    expected and forbidden); the others were never looked for."""
    unwatched = [p for p in target.expected + target.forbidden if p not in watched]
    expected = tuple(p for p in target.expected if p in watched)
    forbidden = tuple(p for p in target.forbidden if p in watched)
    full = check_logs(data.tl, target)
    if forbidden and any(match_count(data.tl.logs, p) for p in forbidden):  # a line seen stays seen
        seen = check_logs(data.tl, Logs((), forbidden))
        return settle(dataclasses.replace(seen, expected=full.expected), data)
    why = None if data.complete else data.incomplete()
    not_watched = "the control's logs were not watched for " + ", ".join(repr(p) for p in unwatched)
    if unwatched and expected and why is None:  # the patterns it did watch can still fail
        part = check_logs(data.tl, Logs(expected, forbidden, target.min_matches))
        if part.verdict == "FAILED":
            return settle(dataclasses.replace(part, expected=full.expected,
                                               message=f"{part.message} ({not_watched})"), data)
    if unwatched:
        return unjudged(full, not_watched)
    return settle(full, data, pass_unless=why, fail_unless=why)


# The only check whose evidence is complete once the incident shows: a control judged by it may stop there.
LOGS = CheckDef("logs", "logs", lambda arm, target: check_logs(arm.tl, target),
                lambda data, target: control_logs(data, target, set(data.watched)), ends_early=True)
