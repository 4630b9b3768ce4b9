"""The local backend: every component is a process on this host, in its own process group."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyspark

from .artifacts import ArtifactPaths
from .cds import ClassArchives
from .components import LaunchSpec, Runtime
from .errors import InfraError
from .procs import ManagedProcess


class LocalBackend:
    name = "local"

    def runtime(self, host_artifacts: ArtifactPaths, host_archives: ClassArchives) -> Runtime:
        java = shutil.which("java")
        if java is None:
            raise InfraError("java is not on PATH; install OpenJDK 17 (apt-get install openjdk-17-jre-headless)")
        return Runtime(
            java=java,
            kafka_classpath=":".join(str(p) for p in host_artifacts.kafka_jars),
            spark_home=str(Path(pyspark.__file__).parent),
            minio=str(host_artifacts.minio),
            toxiproxy=str(host_artifacts.toxiproxy),
            s3proxy=str(host_artifacts.s3proxy),
            # Every JVM runs here, on the JDK and jars the archives were recorded with.
            archives=host_archives,
            shims={name: str(path) for name, path in host_artifacts.shims.items()},
        )

    @staticmethod
    def _env(extra: dict[str, str]) -> dict[str, str]:
        return {**os.environ, **extra}

    def launch(self, spec: LaunchSpec, log_path: Path) -> ManagedProcess:
        return ManagedProcess(spec.name, spec.argv, log_path, env=self._env(spec.env))

    def run_to_completion(self, name: str, argv: list[str], env: dict[str, str], log_path: Path,
                          timeout: float) -> int:
        process = ManagedProcess(name, argv, log_path, env=self._env(env))
        code = process.wait(timeout)
        if code is None:
            process.stop(grace=1)
            raise InfraError(f"{name} did not finish within {timeout:.0f} s; see {log_path}")
        return code

    def close(self) -> None:
        """Processes are stopped through their handles; nothing else to release."""
