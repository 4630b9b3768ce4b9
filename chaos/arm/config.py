"""What one arm of an experiment runs with: its job settings (the profile's, the spec's `job` section, the arm's
own) and its workload, from the spec alone, so that running an arm and judging a stored one agree."""
from __future__ import annotations

import dataclasses
from typing import Any

from job.settings import FACTORIES, settings_document

from ..spec import ExperimentSpec
from ..workload import WorkloadSpec, rotation_rate
from .job import ArmConfig


def workload_of(spec: ExperimentSpec, shape: str, duration_ms: int, seed: int, **changes) -> WorkloadSpec:
    w = spec.workload
    fields: dict[str, Any] = dict(shape=shape, keys=w.keys or 1, rate=w.rate, duration_ms=duration_ms, seed=seed,
                  payload_bytes=w.payload_bytes)
    for name, value in (("zipf_s", w.zipf_s), ("hot_key_share", w.hot_key_share),
                        ("rotation_live_actors", w.rotation_live_actors), ("rotation_events", w.rotation_events)):
        if value is not None:
            fields[name] = value
    if w.rotation_gap is not None:
        fields["rotation_gap_ms"] = round(w.rotation_gap * 1000)
    fields.update(changes)
    if fields["shape"] == "rotating":
        fields["rate"] = rotation_rate(fields["rotation_live_actors"], fields["rotation_gap_ms"],
                                       fields.get("rotation_events", 2))
    if fields["shape"] == "hot_key" and fields["keys"] < 2:
        fields["keys"] = 100
    return WorkloadSpec(**fields)


def arm_config(spec: ExperimentSpec, profile: str) -> ArmConfig:
    """The job settings this arm runs with: the profile's, the spec's `job` section, the arm's settings; sent to the
    job as one document of what departs from the profile (checked here by the job's own settings_document)."""
    base = FACTORIES[profile]("t", "d", "p")
    final = spec.apply_settings(profile, base)
    changes = {f.name: getattr(final, f.name) for f in dataclasses.fields(final)
               if f.name not in ("topic", "deployment", "progress_file", "profile")
               and getattr(final, f.name) != getattr(base, f.name)}
    if profile == "naive":  # processing-time sessions without bounds: event-time settings mean nothing there
        changes = {k: v for k, v in changes.items() if k not in ("watermark_ms", "max_session_ms")}
    placeholder = workload_of(spec, spec.workload.shape, round(spec.phases.total * 1000), spec.seed)
    return ArmConfig(profile=profile, workload=placeholder, partitions=spec.workload.partitions,
                     settings=settings_document(changes), drain_timeout_s=drain_timeout_s(final.gap_ms))


def drain_timeout_s(gap_ms: int) -> float:
    """How long the drain may take: 180 s, or the session gap plus 90 s where that is longer. The naive job's
    processing-time sessions close a whole gap after the last event's batch, whatever the drain sends (the scale
    suite's 180 s gap would otherwise leave them open)."""
    return max(180.0, gap_ms / 1000 + 90.0)
