"""probe:<metric>: the spec's steady-state probes; the fraction of measured samples outside [min, max] in the
probe's phases must be <= its tolerance. One check per probe; a metric probed twice is named probe:<metric>#n."""
from __future__ import annotations

from collections.abc import Sequence

from ..spec import Probe
from .base import ArmData, CheckDef, ControlData, settle
from .timeline import Check, Timeline, at_time, metric, num


def check_probe(tl: Timeline, probe: Probe, name: str | None = None) -> Check:
    name = name or f"probe:{probe.metric}"
    bounds = (f"[{num(probe.minimum) if probe.minimum is not None else '-inf'}, "
              f"{num(probe.maximum) if probe.maximum is not None else 'inf'}]")
    phases = "+".join(probe.phases)
    expected = f"{probe.metric} in {bounds} in {phases}, <= {probe.tolerance:.0%} outside"
    values = [(v, s) for s in tl.samples_in(probe.phases) if (v := metric(s, probe.metric)) is not None]
    if not values:
        return Check(name, "NODATA", expected, "no data", f"{probe.metric} was not measured in {phases}")
    outside = [(v, s) for v, s in values if (probe.minimum is not None and v < probe.minimum)
               or (probe.maximum is not None and v > probe.maximum)]
    fraction = len(outside) / len(values)
    verdict = "PASSED" if fraction <= probe.tolerance + 1e-12 else "FAILED"
    message = f"{len(outside)} of {len(values)} measured {phases} samples outside {bounds}"
    if outside:
        message += f"; first {num(outside[0][0])} at {at_time(outside[0][1])}"
    return Check(name, verdict, expected, f"{len(outside)}/{len(values)} outside ({fraction:.0%})", message)


def control_probe(data: ControlData, probe: Probe, name: str) -> Check:
    check = check_probe(data.tl, probe, name)
    why = None if all(p in data.ended for p in probe.phases) else data.incomplete(probe.phases)
    return settle(check, data, pass_unless=why, fail_unless=why, schedule_matters=probe.phases != ("steady",))


def probe_names(probes: Sequence[Probe]) -> list[str]:
    names = [f"probe:{p.metric}" for p in probes]
    return [name if names.count(name) == 1 else f"{name}#{names[:i + 1].count(name)}" for i, name in enumerate(names)]


def check_probes(arm: ArmData, probes: Sequence[Probe]) -> list[Check]:
    return [check_probe(arm.tl, probe, name) for probe, name in zip(probes, probe_names(probes))]


def control_probes(data: ControlData, probes: Sequence[Probe]) -> list[Check]:
    return [control_probe(data, probe, name) for probe, name in zip(probes, probe_names(probes))]


PROBES = CheckDef("probe", "probes", check_probes, control_probes)
