"""Fault packages against the real stack, outside any experiment: inject puts the fault in place, heal takes it
away (no toxic left, the process running again), and a second heal is harmless — the runner heals every fault
again in `finally`, whatever happened."""
from __future__ import annotations

import json
import time
from pathlib import Path
from types import MappingProxyType

import pytest

from chaos.faults import FaultContext, build
from chaos.history import HistoryWriter, read_history
from chaos.spec import Fault
from infra.stack import Stack

pytestmark = [pytest.mark.integration, pytest.mark.all_backends]


def fault(name: str, target: str, **params) -> Fault:
    return Fault(fault=name, target=target, at=0.0, duration=5.0, start_jitter=0.0, params=MappingProxyType(params))


def context(stack: Stack, tmp_path: Path) -> tuple[FaultContext, HistoryWriter]:
    history = HistoryWriter(tmp_path / "history.jsonl")
    return FaultContext(stack, arm=None, history=history, say=lambda message: None), history


def process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_latency_toxic_is_in_place_until_healed_and_healing_twice_is_harmless(stack, tmp_path):
    ctx, history = context(stack, tmp_path)
    latency = build(fault("network.latency", "kafka", latency=0.3, jitter=0.05, direction="both", toxicity=1.0), ctx)
    latency.run_inject()
    toxics = stack.toxiproxy.toxics("kafka").values()
    assert {(t.type, t.stream, t.attributes.get("latency")) for t in toxics} == {
        ("latency", "upstream", 300), ("latency", "downstream", 300)}
    latency.run_heal()
    latency.run_heal()
    assert stack.toxiproxy.toxics("kafka") == {}
    history.close()
    states = [r["state"] for r in read_history(tmp_path / "history.jsonl") if r["type"] == "fault"]
    assert states == ["injecting", "injected", "healing", "healed"]


def test_a_proxy_taken_down_comes_back_up(stack, tmp_path):
    ctx, history = context(stack, tmp_path)
    down = build(fault("network.down", "s3"), ctx)
    down.run_inject()
    assert stack.toxiproxy.proxies()["s3"].enabled is False
    down.run_heal()
    assert stack.toxiproxy.proxies()["s3"].enabled is True
    history.close()


def test_a_paused_broker_is_stopped_until_healed(stack, tmp_path):
    ctx, history = context(stack, tmp_path)
    broker = stack.handles["kafka"]
    pause = build(fault("process.pause", "broker"), ctx)
    pause.run_inject()
    deadline = time.monotonic() + 5
    while process_state(broker.pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process_state(broker.pid) == "T"  # stopped (SIGSTOP)
    pause.run_heal()
    deadline = time.monotonic() + 5
    while process_state(broker.pid) == "T" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process_state(broker.pid) in ("S", "R")
    assert json.loads(stack.info.to_json())["kafka_bootstrap"]  # the stack still describes itself
    history.close()
