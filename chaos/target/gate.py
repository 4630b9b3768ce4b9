"""Which arms can run on a target (`chaos run --target`): an arm whose faults cannot act there is SKIPPED with the
reason, before anything of it starts, and never reported as PASSED (chaos/verdicts.py).

A pure function of the target file, what the target stack found when it started (its brokers' proxies, whether an
S3 fault proxy is in the path) and the experiment, so the rules are tested without a target (tests/unit). What a
fault needs is what its kind declares (`needs`: a Toxiproxy proxy, the S3 fault proxy, a hook, a preloaded shim;
`kills`: what it killed must come back), never its name. A stack this suite starts is gated on its preloaded shims
too (`preload_missing`: the containers backend preloads none).
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from ..faults import registry as fault_registry  # by module: its kinds are read when an arm is gated
from ..faults.base import FaultError, FaultKind
from ..faults.network import WORKER_LINK, proxies_for, worker_link_proxies
from ..spec import ExperimentSpec
from .model import Target

# Faults through a hook on the job's driver act on a process this suite starts on this host, whatever the target.
OWN_PROCESSES = ("job-driver",)


def _hook_cannot(target: Target, brokers: list[str], fault, kind: FaultKind) -> str | None:
    """Why the target's hook cannot carry out this fault (its kind acts through a hook) on a broker, MinIO or the
    executors, or None."""
    role, hook = fault.target, target.hooks.get(fault.target)
    if hook is None:
        return f"target {target.name} has no hook for {role} (hooks)"
    if role == "broker" and len(brokers) > 1:
        if not hook.per_node:
            return (f"hooks.broker has no {{node}}, and target {target.name} has {len(brokers)} brokers: it cannot "
                    "say which")
        if hook.nodes is not None and hook.nodes != len(brokers):
            return f"hooks.broker.nodes is {hook.nodes}, and target {target.name} has {len(brokers)} broker proxies"
        own = target.kafka.direct_bootstrap_servers or ()
        if kind.kills and len(own) != len(brokers):
            return (f"a killed broker is told down by its own endpoint: kafka.direct_bootstrap_servers must name "
                    f"each of the {len(brokers)} brokers, in node order")
    if role == "executor" and fault.params.get("executors", "all") != "all" and not hook.per_node:
        return "hooks.executor has no {node}: it acts on every executor at once, not on one of them (executors: one)"
    if kind.kills and role != "executor":
        if hook.restart is None:
            return f"a killed {role} must come back, and hooks.{role} has no restart command"
        direct = target.kafka.direct_bootstrap_servers if role == "broker" else target.s3.direct_endpoint
        if not direct:
            # the proxy in front of it always accepts connections: a dead server would look alive, never restarted
            field = "kafka.direct_bootstrap_servers" if role == "broker" else "s3.direct_endpoint"
            return f"a killed {role} is told down by its own endpoint, and the target has no {field}"
    return None


def preload_missing(preloaded: Mapping[str, list[str]], spec: ExperimentSpec, fault_indices: Iterable[int],
                    where: str) -> str | None:
    """Why the arm running `fault_indices` of `spec` cannot act on a stack whose workers preload `preloaded`
    (StackInfo.preloaded: only the local backend's do), or None. `where` names the stack in the reason."""
    for index in fault_indices:
        fault = spec.faults[index]
        shim = next((s for s in fault_registry.FAULTS[fault.fault].needs.worker_shims if s not in preloaded), None)
        if shim is not None:
            return (f"fault {index + 1} ({fault.fault} on {fault.target}): it acts through the shim {shim} preloaded "
                    f"into the Spark workers, and {where} preloads none (only the local backend does: "
                    f"infra/preloads.py)")
    return None


def skip_reason(target: Target, brokers: list[str], s3_fault_proxy: bool, spec: ExperimentSpec,
                fault_indices: Iterable[int]) -> str | None:
    """Why the arm running `fault_indices` of `spec` cannot act on `target`, or None when every fault can.
    `brokers`: the broker proxies' roles the run found (`kafka`, or kafka-1 .. kafka-N)."""
    if spec.topology == "cluster" and len(brokers) < 3:
        return (f"topology cluster needs three brokers, each behind its own proxy (kafka-1 .. kafka-3 under "
                f"toxiproxy.proxies); target {target.name} has {', '.join(brokers)}")
    for index in fault_indices:
        fault = spec.faults[index]
        kind = fault_registry.FAULTS[fault.fault]
        what = f"fault {index + 1} ({fault.fault} on {fault.target})"
        if kind.needs.toxiproxy:
            try:
                roles = proxies_for(fault.target, brokers)
            except FaultError as exc:
                return f"{what}: {exc}"
            missing = [role for role in roles if target.toxiproxy.proxy(role) is None]
            if missing:
                return f"{what}: target {target.name} has no proxy for {', '.join(missing)} (toxiproxy.proxies)"
        if kind.needs.s3_fault_proxy and not s3_fault_proxy:
            return f"{what}: target {target.name} has no S3 fault proxy in its S3 path (s3.fault_proxy)"
        if kind.needs.hook and fault.target not in OWN_PROCESSES:
            reason = _hook_cannot(target, brokers, fault, kind)
            if reason is not None:
                return f"{what}: {reason}"
        if kind.needs.worker_shims:
            return preload_missing({}, spec, [index], f"target {target.name}")
        if fault.on is not None and not s3_fault_proxy:
            # every lifecycle event, a driver's start included, is told from the job's requests the proxy sees
            return (f"{what}: its trigger ({', '.join(fault.on.events)}) watches the job's S3 requests, and target "
                    f"{target.name} has no S3 fault proxy in its S3 path (s3.fault_proxy)")
    return None


def stack_skip_reason(proxies: Collection[str], spec: ExperimentSpec, fault_indices: Iterable[int]) -> str | None:
    """Why the arm running `fault_indices` of `spec` cannot act on a stack this suite started, whose Toxiproxy has
    these proxies: a fault on one worker's own link to the driver where its workers have none (the containers
    backend's workers preload no shim: infra/components.py `preloaded`), or None."""
    for index in fault_indices:
        fault = spec.faults[index]
        if fault.target.startswith(WORKER_LINK):
            try:
                worker_link_proxies(fault.target, proxies)
            except FaultError as exc:
                return f"fault {index + 1} ({fault.fault} on {fault.target}): {exc}"
    return None
