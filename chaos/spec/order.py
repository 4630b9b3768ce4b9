"""How an arm's faults follow each other, checked as a spec is validated (chaos/spec/experiment.py): spaced for a
recovery judged alone (`check_spacing`), or one after another for a compact schedule (`check_one_after_another`)."""
from __future__ import annotations

from ..arm.sampler import SAMPLE_EVERY_S
from ..faults import registry as fault_registry  # by module: its names are read when a spec is validated
from .fields import EPSILON, Invalid, fmt_seconds
from .model import Arm, Fault


def check_spacing(faults: tuple[Fault, ...], arms: tuple[Arm, ...]) -> None:
    """An arm whose recovery target is not `grouped` judges each disruption alone, watched only until the next fault
    begins (chaos/checks/recovery.py): so a fault's window must end at least the target's window (within, then its
    healthy samples) before the arm's next fault can begin, and a fault that acts more than once must act that far
    apart. Faults whose windows overlap act together (a flap and its resets); a momentary one may do so only inside a
    lasting fault's window, where its disruption counts from that fault's heal. A server a kill restarts, or a damage
    that waits for its file, may come back after its window: the spacing is a floor, not a guarantee."""
    for arm in arms:
        target = arm.targets.recovery
        if target is None or target.grouped:
            continue
        need = target.within + target.healthy_samples * SAMPLE_EVERY_S
        fix = (f"faults at least {fmt_seconds(need)} apart (recovery within {fmt_seconds(target.within)} + "
               f"{target.healthy_samples} samples), or grouped: true in arms.{arm.profile}.targets.recovery")
        indices = sorted((i for i in (arm.faults if arm.faults is not None else range(len(faults)))
                          if _disrupts(faults[i])), key=lambda i: faults[i].at)
        for i in indices:
            fault, count = faults[i], faults[i].params.get("count")
            if not isinstance(count, int) or count < 2:
                continue
            if fault.on is not None:
                raise Invalid(("faults", str(i), "params", "count"), f"{count} firings on the job's events may come "
                              f"closer than recovery's {fmt_seconds(need)}, and arm {arm.profile} judges each alone",
                              fix)
            interval = fault.params.get("interval") or fault.duration / count
            if isinstance(interval, (int, float)) and interval < need - EPSILON:
                raise Invalid(("faults", str(i), "params", "interval"), f"acts every {fmt_seconds(interval)}, sooner "
                              f"than recovery's {fmt_seconds(need)}, and arm {arm.profile} judges each alone", fix)
        end, last = None, None  # the latest end of the faults so far acting together, and the latest of them
        for i in indices:
            fault = faults[i]
            if end is not None and last is not None and fault.at < end:
                momentary = fault_registry.FAULTS[fault.fault].momentary
                inside = any(not fault_registry.FAULTS[faults[k].fault].momentary
                             and faults[k].at + faults[k].start_jitter <= fault.at
                             and fault.latest_end <= faults[k].at + faults[k].duration + EPSILON
                             for k in indices if k != i)
                if momentary and not inside:
                    raise Invalid(("faults", str(i), "at"), f"acts within faults.{last}'s window, outside any lasting "
                                  f"fault, and arm {arm.profile} judges each disruption alone", fix)
            elif end is not None and fault.at - end < need - EPSILON:
                raise Invalid(("faults", str(i), "at"), f"starts {fmt_seconds(fault.at - end)} after faults.{last}'s "
                              f"window ends, sooner than recovery's {fmt_seconds(need)}, and arm {arm.profile} judges "
                              "each disruption alone", fix)
            if end is None or fault.latest_end > end:
                end, last = fault.latest_end, i


def _disrupts(fault: Fault) -> bool:
    """Whether the fault does something the job must recover from (its kind's `harmless` says when it does not)."""
    harmless = fault_registry.FAULTS[fault.fault].harmless
    return harmless is None or not harmless(fault.params)


def check_one_after_another(faults: tuple[Fault, ...], arms: tuple[Arm, ...]) -> None:
    """`schedule: compact` moves each window up to the end of the one before: that needs each arm's windows in
    order, none starting before the previous has ended, and no workload-shaping fault (its data is planned ahead
    at fixed times)."""
    for i, fault in enumerate(faults):
        if fault_registry.FAULTS[fault.fault].shapes_workload:
            raise Invalid(("faults", str(i), "fault"), f"{fault.fault} shapes the workload, which is planned at fixed "
                          "times, and the schedule is compact", "schedule: fixed, or no fault that shapes the workload")
    for arm in arms:
        indices = list(arm.faults if arm.faults is not None else range(len(faults)))
        for before, after in zip(indices, indices[1:]):
            if faults[after].at < faults[before].latest_end:
                raise Invalid(("faults", str(after), "at"), f"starts at {fmt_seconds(faults[after].at)}, before "
                              f"faults.{before} can have ended ({fmt_seconds(faults[before].latest_end)}), and the "
                              f"schedule is compact (arm {arm.profile})", "windows one after another, in order; "
                              "or schedule: fixed")
