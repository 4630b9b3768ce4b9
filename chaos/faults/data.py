"""Data faults: the workload's shape changes for the fault's window. The runner plans the events of the window with
the kind's `reshape` (chaos.run.segments); inject and heal only mark the window in the history."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..workload import MAX_HOT_KEY_PAYLOAD_BYTES
from .base import BaseFault, FaultKind, Param, params


class WorkloadWindow(BaseFault):
    def inject(self) -> None:
        pass

    def heal(self) -> None:
        pass


def _hot_key(p: Mapping[str, Any]) -> Mapping[str, Any]:
    changes = {"shape": "hot_key", "hot_key_share": p["share"]}
    if p.get("payload_bytes") is not None:
        changes["hot_key_payload_bytes"] = p["payload_bytes"]
    return changes


def _key_rotation(p: Mapping[str, Any]) -> Mapping[str, Any]:
    return {"shape": "rotating", "rotation_live_actors": p["live_actors"], "rotation_gap_ms": round(p["gap"] * 1000)}


KINDS = (
    FaultKind("data.hot_key", "one key takes `share` of all events and never pauses", ("workload",), params(
        share=Param("number", "fraction of events on the hot key", default=0.5, minimum=0.01, maximum=0.99),
        payload_bytes=Param("int", "payload bytes of each hot-key event (default: the workload's payload_bytes)",
                            minimum=0, maximum=MAX_HOT_KEY_PAYLOAD_BYTES),
    ), implementation=WorkloadWindow, momentary=True, reshape=_hot_key),
    FaultKind("data.key_rotation", "keys send two events `gap` apart and retire; a new key replaces each",
              ("workload",), params(
                  live_actors=Param("int", "keys live at any time", required=True, minimum=1),
                  gap=Param("duration", "event time between a key's two events", required=True, minimum=0.001),
              ), implementation=WorkloadWindow, momentary=True, reshape=_key_rotation),
)
