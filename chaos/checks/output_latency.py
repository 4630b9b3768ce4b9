"""emitted_within: no session's output waits longer than its bound after the session's first event.

What a user of the job sees when a key never pauses and nothing cuts its session: no output for that key at all,
for as long as it keeps talking. oracle.json's `emission` (chaos/oracle.py emission_waits) has the longest wait of
any emitted session, from its first event to the end of the batch that wrote it; the drain closes every session at
the end, so a session no rule closed shows as one that waited the whole run.
"""
from __future__ import annotations

from collections.abc import Mapping

from .base import ArmData, CheckDef, ControlData, settle
from .timeline import Check, secs


def check_emitted_within(oracle: Mapping[str, object] | None, within: float,
                         missing: str = "no oracle.json") -> Check:
    expected = f"every session written within {secs(within)} of its first event"
    emission = oracle.get("emission") if oracle is not None else None
    if not isinstance(emission, Mapping):
        return Check("emitted_within", "NODATA", expected, "no data",
                     f"{missing if oracle is None else 'oracle.json has no emission waits'}: not judged")
    longest = emission.get("longest")
    if not isinstance(longest, Mapping) or not isinstance(longest.get("wait_ms"), (int, float)):
        return Check("emitted_within", "NODATA", expected, "no data", "no emitted session could be timed")
    wait = float(longest["wait_ms"]) / 1000
    measured = f"the longest {secs(wait)}"
    which = (f"key {longest.get('key')!r}'s session of {longest.get('count')} events (batch {longest.get('batch_id')})"
             f" over {emission.get('sessions')} sessions timed")
    if wait > within:
        return Check("emitted_within", "FAILED", expected, measured,
                     f"{which} was written {secs(wait)} after its first event, past the bound of {secs(within)}: "
                     "its events had no output for that long")
    return Check("emitted_within", "PASSED", expected, measured, f"the longest wait: {which}, {secs(wait)}")


def _judge(arm: ArmData, target: Mapping[str, float]) -> Check:
    return check_emitted_within(arm.oracle, float(target["within"]), arm.why_missing("oracle"))


def control_emitted_within(data: ControlData, target: Mapping[str, float]) -> Check:
    # A wait past the bound is final; a pass needs the control's output read back after a whole run.
    check = check_emitted_within(data.oracle, float(target["within"]), data.why_missing("oracle"))
    return settle(check, data, pass_unless=None if data.complete else data.incomplete())


EMITTED_WITHIN = CheckDef("emitted_within", "emitted_within", _judge, control_emitted_within)
