"""The containers backend: each stack component runs in its own container, started through testcontainers.

One module of ~520 lines on purpose: the engine set-up, the handles, the backend and the clean-up of leftovers all
apply one convention (the labels, host networking, mounts and user below) and change together; split, each part
would have to know the others' half of it. The seams that do exist are already apart: images.py, owners.py.

Kafka, MinIO, Toxiproxy, the S3 fault proxy, the Spark master and the Spark worker each run as a container of
the image infra/images.py resolves for them (a local build where no registry is reachable). The commands are the
ones infra/components.py builds, unchanged: this backend only gives them the in-image program paths
(images.LAYOUT) through `runtime()` and decides *where* they run. Readiness checks, ports, proxies and
teardown order stay in infra/stack.py, shared with the local backend. Spark drivers stay host processes.

How a container is set up:
- host networking (network "host"): every server binds 127.0.0.1 on ports the Stack chose free, exactly
  as the local backend does; nothing ever connects to a bridge address (the engine has no bridge).
- the run directory is bind-mounted read-write at its own path, so configuration, data and work
  directories are where the local backend puts them and a restarted container finds its data again.
  The Spark worker also gets the driver's Python (repository, virtualenv and base interpreter,
  read-only, at their own paths): executors start Python workers with the driver's interpreter.
- the container's output is copied to <run>/logs/<component>.log as it is written.
- the container runs as the invoking user, so everything it writes in the run directory is ours to delete.
- labels: chaos-suite.run (one per backend instance), chaos-suite.run-dir, chaos-suite.component and
  chaos-suite.owner (boot id, PID namespace, pid and start time of the process that started it).
  Teardown removes the run's containers on success, failure and interrupt; the next start removes the
  containers of runs whose owning process is dead (a crashed or killed run), never those of a live one.

Handles behave like local process groups: `pid` is the container's init process as this host sees it
(so Spark executors are found as its descendants), `signal()` signals every process of the container
(as killpg does for a local group), `stop()` sends SIGTERM, then SIGKILL after the grace period, and
removes the container.

Testcontainers settings (see docs/containers.md): Ryuk is disabled (its image cannot be pulled where no
registry is reachable; cleanup is by label instead), TESTCONTAINERS_CONNECTION_MODE=docker_host and
TC_HOST=127.0.0.1 (this machine looks like a container to testcontainers, which would otherwise look
for a gateway or bridge address). No port is exposed or looked up: with host networking the ports are
the ones in the commands.
"""
from __future__ import annotations

import functools
import getpass
import os
import secrets
import signal as signals
import sys
import threading
import time
from pathlib import Path

from . import images
from .artifacts import ArtifactPaths
from .cds import ClassArchives
from .components import LOOPBACK, LaunchSpec, Runtime, role_of
from .errors import ComponentError, InfraError
from .owners import owner_alive, owner_label, pid_namespace, proc_state, start_ticks
from .paths import REPO_ROOT

LABEL = "chaos-suite"
LABEL_RUN = "chaos-suite.run"
LABEL_RUN_DIR = "chaos-suite.run-dir"
LABEL_COMPONENT = "chaos-suite.component"
LABEL_OWNER = "chaos-suite.owner"

# Which image runs each component (a `-prepare` step runs in its component's image).
IMAGE_OF = {"toxiproxy": "toxiproxy", "minio": "minio", "kafka": "kafka", "spark-master": "spark",
            "spark-worker": "spark", "s3proxy": "s3proxy"}
# Components that start Python processes with the driver's interpreter (executors' Python workers).
NEEDS_PYTHON = {"spark-worker"}
START_TIMEOUT_S = 30.0
REMOVE_TIMEOUT_S = 60.0
FIX = "run: infra/engine.sh --install (or start a Docker engine)"


# -- testcontainers settings ------------------------------------------------------------------------------
def _configure_testcontainers() -> None:
    """Ryuk off, docker_host connection mode on 127.0.0.1 (FACTS.md, "Docker and Testcontainers").

    testcontainers reads its environment once, at import: set both the environment (for anything
    imported later) and the already-built configuration object.
    """
    os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"
    os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")
    os.environ.setdefault("TC_HOST", LOOPBACK)
    from testcontainers.core.config import ConnectionMode, testcontainers_config

    testcontainers_config.ryuk_disabled = True
    testcontainers_config.connection_mode_override = ConnectionMode(os.environ["TESTCONTAINERS_CONNECTION_MODE"])
    testcontainers_config.tc_host_override = os.environ["TC_HOST"]


# -- the engine ---------------------------------------------------------------------------------------------
def engine_status(timeout: int = 5) -> tuple[bool, str]:
    """(True, "Docker <version> ...") when an engine answers, else (False, one line with what to do)."""
    try:
        client = images.docker_client(timeout=timeout)
    except InfraError as error:
        return False, str(error)
    try:
        version, info = client.version(), client.info()
    except Exception as error:  # answered the ping, failed after: still not usable
        return False, f"the Docker engine answered but failed ({str(error)[:120]}); {FIX}"
    finally:
        client.close()
    return True, (f"Docker {version.get('Version')} (API {version.get('ApiVersion')}, storage "
                  f"{info.get('Driver')}, {info.get('Containers', 0)} containers)")


# Every listing passes ignore_removed: docker-py lists, then inspects each container, and a one-shot container
# (kafka's storage format) removed in between made the listing fail with 404 (a CI run's interrupt test).


def remove_leftovers(client, progress=lambda message: None) -> list[str]:
    """Remove containers of runs whose owning process is dead (a crash, kill -9, a lost CI job).

    Containers of live runs, and of runs this host cannot judge, are left alone. Returns removed names.
    """
    removed = []
    for container in client.containers.list(all=True, ignore_removed=True, filters={"label": LABEL_OWNER}):
        owner = container.labels.get(LABEL_OWNER, "")
        if owner_alive(owner) is False:
            _remove(container)
            removed.append(container.name)
    if removed:
        progress(f"removed {len(removed)} container(s) left by a crashed run: {', '.join(sorted(removed))}")
    return removed


def containers_of(run_dir: Path | str, client=None) -> list[str]:
    """Names of the containers (running or not) a run directory's stack started; [] without an engine."""
    own = client is None
    try:
        client = client or images.docker_client(timeout=10)
    except InfraError:
        return []
    try:
        found = client.containers.list(all=True, ignore_removed=True,
                                       filters={"label": f"{LABEL_RUN_DIR}={Path(run_dir).resolve()}"})
        return sorted(c.name for c in found)
    finally:
        if own:
            client.close()


def _remove(container) -> None:
    import docker

    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as error:
        if "already in progress" not in str(error):
            raise InfraError(f"cannot remove container {container.name}: {str(error)[:160]}; "
                             f"remove it with: docker rm -f {container.name}") from error
        # A concurrent teardown (another stack's start removing dead runs' containers) is removing it: wait for
        # that removal, so "removed" means gone (a CI run listed the container still in "removing" after this).
        _wait_gone(container)


def _wait_gone(container, timeout: float = REMOVE_TIMEOUT_S) -> None:
    import docker

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            container.reload()
        except docker.errors.NotFound:
            return
        time.sleep(0.2)
    raise InfraError(f"container {container.name} was still being removed after {timeout:.0f} s; "
                     f"remove it with: docker rm -f {container.name}")


# -- one container ---------------------------------------------------------------------------------------------
@functools.cache
def _component_class():
    """ComponentContainer, defined on first use: importing testcontainers must wait for its settings."""
    _configure_testcontainers()
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import ContainerStatusWaitStrategy

    class ComponentContainer(DockerContainer):
        """One command in a container whose output goes to `log_path`. Stop is idempotent and safe against a
        concurrent start: teardown may race a launch."""

        def __init__(self, image: str, name: str, argv: list[str], env: dict[str, str], labels: dict[str, str],
                     mounts: dict[str, tuple[str, str]], log_path: Path, wait_running: bool = True) -> None:
            super().__init__(image, docker_client_kw={"timeout": 120})
            self.component = labels.get(LABEL_COMPONENT, name)
            self.with_name(name)
            self.with_command(argv[1:])
            self.with_envs(**env)
            for source, (target, mode) in mounts.items():
                self.with_volume_mapping(source, target, mode)
            # One with_kwargs call: it replaces earlier kwargs. `network="host"` (not network_mode) also stops
            # testcontainers from attaching the container to a network it guesses.
            self.with_kwargs(network="host", entrypoint=[argv[0]], labels=labels, user=_user(),
                             working_dir="/", stop_signal="SIGTERM")
            if wait_running:  # a one-shot command may have finished already: "exited" is not a failed start
                self.waiting_for(ContainerStatusWaitStrategy().with_poll_interval(0.05)
                                 .with_startup_timeout(int(START_TIMEOUT_S)))
            self.log_path = log_path
            self._guard = threading.Lock()
            self._stopped = False
            self._follower: threading.Thread | None = None

        def start(self):
            with self._guard:
                if self._stopped:
                    raise InfraError("the stack is shutting down; nothing new is started")
                try:
                    super().start()
                except Exception as error:
                    self.copy_logs()
                    self._remove_now()
                    detail = str(error).splitlines()[0][:160] if str(error) else type(error).__name__
                    raise ComponentError(f"{self.component}: the container did not start ({detail}); "
                                         f"see {self.log_path}") from error
            return self

        def follow_logs(self) -> None:
            """Copy the container's output to the log file while it runs (a thread; ends with the container)."""
            def follow() -> None:
                try:
                    with open(self.log_path, "ab", buffering=0) as log:
                        for chunk in self.get_wrapped_container().logs(stream=True, follow=True):
                            log.write(chunk)
                except Exception:
                    pass  # the container was removed under the stream: its output is complete

            self._follower = threading.Thread(target=follow, name=f"logs-{self.component}", daemon=True)
            self._follower.start()

        def logs_done(self, timeout: float = 2.0) -> None:
            if self._follower is not None:
                self._follower.join(timeout)

        def copy_logs(self) -> None:
            """One-shot copy (a command that has finished, or a container that failed to start)."""
            if self._container is None:
                return
            try:
                output = self._container.logs(stdout=True, stderr=True)
            except Exception:
                return
            with open(self.log_path, "ab") as log:
                log.write(output)

        def _remove_now(self) -> None:
            if self._container is not None:
                _remove(self._container)
            try:
                self.get_docker_client().client.close()
            except Exception:
                pass

        def stop(self, force: bool = True, delete_volume: bool = True) -> None:
            with self._guard:
                if self._stopped:
                    return
                self._stopped = True
                self._remove_now()

    return ComponentContainer


def _component_container(image: str, name: str, argv: list[str], env: dict[str, str], labels: dict[str, str],
                         mounts: dict[str, tuple[str, str]], log_path: Path, wait_running: bool = True):
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return _component_class()(image, name, argv, env, labels, mounts, log_path, wait_running)


def _user() -> str:
    return f"{os.getuid()}:{os.getgid()}"


def _user_env() -> dict[str, str]:
    """A non-root user has no passwd entry in the image: give Hadoop/Spark a name and Java a home."""
    if os.getuid() == 0:
        return {}
    name = getpass.getuser()
    return {"HOME": "/tmp", "HADOOP_USER_NAME": name, "SPARK_USER": name, "USER": name}


def _namespace_pids(init_pid: int) -> list[int] | None:
    """Host pids of every process in the container of `init_pid`; None when this host cannot tell
    (not allowed to read their namespaces, or the container shares our PID namespace)."""
    namespace = pid_namespace(init_pid)
    if namespace is None or namespace == pid_namespace():
        return None
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and pid_namespace(entry) == namespace:
            members.append(int(entry))
    return members


class ContainerHandle:
    """A running component container, signalled and stopped like a local process group."""

    def __init__(self, name: str, container, argv0: str):
        self.name = name
        self.container = container
        self.log_path: Path = container.log_path
        wrapped = container.get_wrapped_container()
        wrapped.reload()
        self.id: str = wrapped.id
        self.container_name: str = wrapped.name
        host_pid = int(wrapped.attrs.get("State", {}).get("Pid") or 0)
        # The engine's pid is this host's pid only when the engine runs in our PID namespace (infra/engine.sh's
        # does); check that the process there is the command we started before trusting it.
        self.pid: int | None = host_pid if host_pid and _is_command(host_pid, argv0) else None
        self._ticks = start_ticks(self.pid) if self.pid else None

    def alive(self) -> bool:
        if self.pid is not None:
            if proc_state(self.pid) not in (None, "Z", "X") and start_ticks(self.pid) == self._ticks:
                return True
            self.container.logs_done()  # the log file is complete before anyone reads it for the cause
            return False
        try:
            wrapped = self.container.get_wrapped_container()
            wrapped.reload()
            if wrapped.status in ("running", "paused", "restarting"):
                return True
        except Exception:
            pass
        self.container.logs_done()
        return False

    def signal(self, signum: int) -> None:
        """Signal every process of the container (a local component's whole process group)."""
        members = _namespace_pids(self.pid) if self.pid is not None else None
        if members is None:  # cannot see the container's processes: the engine signals its init process
            import docker

            try:
                self.container.get_wrapped_container().kill(signal=int(signum))
            except docker.errors.APIError:
                pass  # not running
            return
        for pid in members:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM, SIGKILL whatever is left after `grace` seconds, then remove the container."""
        if self.alive():
            self.signal(signals.SIGCONT)  # a paused process cannot act on SIGTERM
            self.signal(signals.SIGTERM)
            deadline = time.monotonic() + grace
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.alive():
                self.signal(signals.SIGKILL)
                deadline = time.monotonic() + 10
                while self.alive() and time.monotonic() < deadline:
                    time.sleep(0.02)
        self.container.logs_done()
        self.container.stop()


def _is_command(pid: int, argv0: str, timeout: float = 3.0) -> bool:
    """Whether host process `pid` runs `argv0`. The engine reports a container running as soon as runc has
    released its init process, which may still be `runc init` for a moment under load: poll briefly."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            first = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
        except OSError:
            return False
        if first == argv0 or Path(first).name == Path(argv0).name:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


# -- the backend -----------------------------------------------------------------------------------------------
class ContainersBackend:
    name = "containers"

    def __init__(self, run_dir: Path | None = None, progress=None):
        self.run_id = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.owner = owner_label()
        self.run_dir = Path(run_dir).resolve() if run_dir else None
        self.progress = progress or (lambda message: print(f"[containers] {message}", file=sys.stderr, flush=True))
        self.images: dict[str, str] = {}
        self._client = None
        self._lock = threading.Lock()
        self._live: set = set()
        self._closed = False
        self._count = 0

    # Backend protocol -----------------------------------------------------------------------------------------
    def runtime(self, host_artifacts: ArtifactPaths, host_archives: ClassArchives) -> Runtime:
        _configure_testcontainers()
        self._client = images.docker_client(timeout=120)
        remove_leftovers(self._client, self.progress)
        self.images = images.resolve(host_artifacts, self._client)
        layout = images.LAYOUT
        # No class-data archives here: the images' JVMs are other JDK builds on other classpaths (infra/cds.py).
        return Runtime(java=layout.java, kafka_classpath=f"{layout.kafka_libs}/*", spark_home=layout.spark_home,
                       minio=layout.minio, toxiproxy=layout.toxiproxy, s3proxy=layout.s3proxy)

    def launch(self, spec: LaunchSpec, log_path: Path) -> ContainerHandle:
        container = self._new(spec.name, spec.argv, spec.env, log_path)
        self._start(container)
        container.follow_logs()
        return ContainerHandle(spec.name, container, spec.argv[0])

    def run_to_completion(self, spec_name: str, argv: list[str], env: dict[str, str], log_path: Path,
                          timeout: float) -> int:
        container = self._new(spec_name, argv, env, log_path, wait_running=False)
        self._start(container)
        try:
            try:
                status = container.get_wrapped_container().wait(timeout=timeout)
            except Exception as error:  # requests' ReadTimeout / ConnectionError: still running
                raise InfraError(f"{spec_name} did not finish within {timeout:.0f} s; see {log_path}") from error
            container.copy_logs()
            return int(status.get("StatusCode", -1))
        finally:
            container.stop()
            with self._lock:
                self._live.discard(container)

    def close(self) -> None:
        """Remove every container this backend started and any it lost track of (by the run label)."""
        with self._lock:
            self._closed = True
            live, self._live = list(self._live), set()
        errors = []
        for container in live:
            try:
                container.stop()
            except InfraError as error:
                errors.append(error)
        if self._client is not None:
            try:
                for container in self._client.containers.list(all=True, ignore_removed=True,
                                                              filters={"label": f"{LABEL_RUN}={self.run_id}"}):
                    _remove(container)
            except InfraError as error:
                errors.append(error)
            except Exception as error:  # the engine went away: nothing more can be removed from here
                errors.append(InfraError(f"cannot list this run's containers ({str(error)[:120]}); "
                                         "remove them with: docker rm -f "
                                         f"$(docker ps -aq --filter label={LABEL_RUN}={self.run_id})"))
            finally:
                self._client.close()
        if errors:
            raise errors[0]

    # helpers --------------------------------------------------------------------------------------------------
    def _new(self, name: str, argv: list[str], env: dict[str, str], log_path: Path, wait_running: bool = True):
        if self._client is None:
            raise InfraError("the containers backend was used before runtime(); start it through infra.stack.Stack")
        component = name.removesuffix("-prepare")
        image = self.images[IMAGE_OF[role_of(component)]]
        run_dir = self.run_dir or log_path.resolve().parent.parent  # the Stack keeps logs in <run>/logs
        with self._lock:
            self._count += 1
            number = self._count
        labels = {LABEL: "true", LABEL_RUN: self.run_id, LABEL_RUN_DIR: str(run_dir), LABEL_COMPONENT: name,
                  LABEL_OWNER: self.owner}
        container = _component_container(
            image, f"chaos-{self.run_id}-{name}-{number}", argv, {**env, **_user_env()}, labels,
            _mounts(run_dir, python=role_of(component) in NEEDS_PYTHON), log_path, wait_running)
        return container

    def _start(self, container) -> None:
        with self._lock:
            if self._closed:
                raise InfraError("the stack is shutting down; nothing new is started")
            self._live.add(container)
        try:
            container.start()
        except BaseException:
            with self._lock:
                self._live.discard(container)
            raise


def _mounts(run_dir: Path, python: bool) -> dict[str, tuple[str, str]]:
    """host path -> (path in the container, mode): each at its own path, so commands need no rewriting."""
    mounts = {str(run_dir): (str(run_dir), "rw")}
    if python:
        for path in _python_paths():
            mounts.setdefault(str(Path(path).resolve()), (path, "ro"))
    return mounts


SYSTEM_PREFIXES = ("/usr", "/usr/local", "/")


def _python_paths() -> list[str]:
    """What the driver's interpreter needs at its own path inside a container: the repository (the job's
    modules, and the virtualenv when it lives there), the virtualenv and the base installation.

    A base installation under /usr cannot be mounted over the image's; the images carry Debian bookworm's
    python3, which is the interpreter a Debian 12 host's virtualenv points at.
    """
    paths = [str(REPO_ROOT)]
    for prefix in (sys.prefix, sys.base_prefix):
        if prefix in SYSTEM_PREFIXES or prefix.startswith("/usr/"):
            if prefix == sys.base_prefix and sys.version_info[:2] != (3, 11):
                raise InfraError(f"the containers backend runs executors' Python with this interpreter "
                                 f"({sys.executable}, Python {sys.version.split()[0]}), but the images carry "
                                 f"Debian's Python 3.11; use a Python 3.11 virtualenv")
            continue
        if not any(prefix == p or prefix.startswith(p + "/") for p in paths):
            paths.append(prefix)
    return paths


def main(argv: list[str]) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m infra.containers")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="whether a Docker engine answers")
    commands.add_parser("clean", help="remove containers of dead runs (the next start does it anyway)")
    args = parser.parse_args(argv)
    try:
        if args.command == "status":
            ok, detail = engine_status()
            print(detail)
            return 0 if ok else 3
        if args.command == "clean":
            client = images.docker_client()
            print(json.dumps(remove_leftovers(client)))
            return 0
        raise AssertionError(args.command)
    except KeyboardInterrupt:
        return 130
    except InfraError as error:
        print(f"containers: {error}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
