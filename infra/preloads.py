"""Shims (infra/shims/) preloaded into the Spark workers of a local stack, and so into every executor they launch
(executors inherit the worker's environment).

`worker_env` is the one place that decides what a worker preloads: the environment its launch adds. Each shim is
inert until a fault switches it on through its control file, so the preload is always there on the local backend
(its cost, measured inert: docs/lab-notes.md, "Disk faults under RocksDB"). The containers backend preloads nothing:
the workers run in images without the shims, and faults that need one are SKIPPED there (chaos/target/gate.py).

fsfault (infra/shims/fsfault.c) fails file calls under the worker's Spark local directory, only in RocksDB's
working directories (Spark's RocksDB state store creates them as `StateStoreId(...)-<uuid>` under the executor's
first local directory, which the worker makes under SPARK_LOCAL_DIRS): shuffle files and logs are never hit.

redirect (infra/shims/redirect.c) sends a cluster worker's, and its executors', connections to the driver through
that worker's own proxies, so a fault can cut the driver off from one worker alone.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

FSFAULT = "fsfault"
REDIRECT = "redirect"
# the part of a path below the local directory that only RocksDB's working directories have
ROCKSDB_DIR_MARK = "/StateStoreId("


def local_dir(stack_dir: Path, worker: str) -> Path:
    """The worker's SPARK_LOCAL_DIRS: its executors' scratch space, RocksDB's working copies among it."""
    return stack_dir / "spark-local" / worker


def disk_fault_control(stack_dir: Path, worker: str) -> Path:
    """The file that switches fsfault on and off in this worker's executors (format: infra/shims/fsfault.c)."""
    return stack_dir / "shims" / f"{FSFAULT}-{worker}.control"


def worker_env(shims: Mapping[str, Path], stack_dir: Path, worker: str,
               redirect: Mapping[str, str] | None = None) -> dict[str, str]:
    """What worker `worker` adds to its environment: its local directory, and the shims it preloads with what they
    read (a shim not built is simply not preloaded, and the faults that need it fail to inject). `redirect`: the
    redirect shim's setting (a cluster worker's own links to the driver, infra/components.py `redirect_to_link`)."""
    directory = local_dir(stack_dir, worker)
    env = {"SPARK_LOCAL_DIRS": str(directory)}
    preload: list[str] = []
    if FSFAULT in shims:
        preload.append(str(shims[FSFAULT]))
        env |= {"FSFAULT_CONTROL": str(disk_fault_control(stack_dir, worker)),
                "FSFAULT_PREFIX": str(directory) + "/", "FSFAULT_MATCH": ROCKSDB_DIR_MARK}
    if redirect and REDIRECT in shims:
        preload.append(str(shims[REDIRECT]))
        env |= redirect
    if preload:
        env["LD_PRELOAD"] = " ".join(preload)
    return env


def preloaded(shims: Mapping[str, Path], worker_envs: Mapping[str, Mapping[str, str]]) -> dict[str, list[str]]:
    """Shim name -> the workers whose environment (`worker_env`'s) preloads it."""
    found: dict[str, list[str]] = {}
    for worker, env in worker_envs.items():
        for library in env.get("LD_PRELOAD", "").split():
            name = next((name for name, path in shims.items() if str(path) == library), None)
            if name is not None:
                found.setdefault(name, []).append(worker)
    return found
