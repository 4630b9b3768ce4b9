"""`chaos stack up [--write-target FILE]`: start the stack and keep it running until Ctrl-C (or SIGTERM), then tear
everything down. With --write-target the running stack is written as a target file (chaos/target/from_stack.py) that
another process can use (`chaos doctor --target FILE`); the file is removed when the stack stops."""
from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .. import errors
from ..store import new_run_dir
from .common import progress as _progress

# MinIO refuses shorter root keys.
MIN_ACCESS_KEY, MIN_SECRET_KEY = 3, 8
POLL_S = 1.0
# A target's restart hook (chaos/target/from_stack.py RESTART_SIGNALS) asks for one server by a signal; the request
# waits until that server is down (a broker shutting down after SIGTERM stops listening before it exits), at most this
# long.
RESTART_WAIT_S = 60.0
_restarts_asked: dict[str, float] = {}  # component -> deadline (monotonic)


def _credentials_from_env():
    """MinIO's keys from the variables the target names: another process with the same environment reaches the
    stack, and no value is ever written. Exit 2 (nothing started) when they are missing or too short for MinIO."""
    from infra.access import Credentials

    from ..target.from_stack import ACCESS_KEY_ENV, SECRET_KEY_ENV

    access, secret = os.environ.get(ACCESS_KEY_ENV, ""), os.environ.get(SECRET_KEY_ENV, "")
    if len(access) < MIN_ACCESS_KEY or len(secret) < MIN_SECRET_KEY:
        raise errors.ChaosError(
            f"--write-target needs {ACCESS_KEY_ENV} (at least {MIN_ACCESS_KEY} characters) and {SECRET_KEY_ENV} (at "
            f"least {MIN_SECRET_KEY}) in the environment: the stack's MinIO takes them as its keys and the target "
            "names them; set both, in the environment of whatever uses the target too", errors.USAGE)
    return Credentials(access, secret)


def _kafka_login_from_env():
    """The brokers' SASL login from KAFKA_USERNAME and KAFKA_PASSWORD, which the target names (as the AWS keys are);
    exit 2 when they are missing or unusable."""
    from infra.access import KAFKA_PASSWORD_ENV, KAFKA_USERNAME_ENV, KafkaLogin

    username, password = os.environ.get(KAFKA_USERNAME_ENV, ""), os.environ.get(KAFKA_PASSWORD_ENV, "")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{3,64}", username) or len(password) < MIN_SECRET_KEY or '"' in password:
        raise errors.ChaosError(
            f"--kafka-sasl with --write-target needs {KAFKA_USERNAME_ENV} (3-64 of letters, digits, . _ -) and "
            f"{KAFKA_PASSWORD_ENV} (at least {MIN_SECRET_KEY} characters, no double quote) in the environment: the "
            "brokers take them as their login and the target names them", errors.USAGE)
    return KafkaLogin(username, password)


def _target_path(path: Path) -> Path:
    path = path.absolute()
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK):
        raise errors.ChaosError(f"--write-target {path}: {path.parent} is not a writable directory; give a path in "
                                "one", errors.USAGE)
    if path.is_dir():
        raise errors.ChaosError(f"--write-target {path}: is a directory; give a file name", errors.USAGE)
    return path


def stack_up(backend: str, target: Path | None, out: Path | None, topology: str = "single",
             s3_tls: bool = False, kafka_sasl: bool = False) -> int:
    from infra.access import KafkaLogin
    from infra.stack import Stack

    credentials = _credentials_from_env() if target is not None else None
    kafka_login = (_kafka_login_from_env() if target is not None else KafkaLogin.random()) if kafka_sasl else None
    # Ctrl-C is how this command ends (chaos/cli.py handles SIGINT even where a script's `&` left it ignored).
    target = _target_path(target) if target is not None else None
    run_dir = new_run_dir("stack-up", out)
    if threading.current_thread() is threading.main_thread():
        from ..target.from_stack import RESTART_SIGNALS, restart_requests

        for component, name in RESTART_SIGNALS.items():
            signal.signal(getattr(signal, f"SIG{name}"), _asker(component, restart_requests(run_dir)))
    _progress(f"run directory: {run_dir}")
    up = False
    try:
        with Stack(run_dir, backend=backend, progress=_progress, credentials=credentials, s3_tls=s3_tls,
                   kafka_login=kafka_login,
                   topology=topology) as stack:
            if target is not None:
                from ..target.from_stack import write_target

                written = write_target(stack, target)
                _progress(f"target written: {target} (chaos doctor --target {target}); hooks for "
                          f"{', '.join(written.hooks) or 'no role'}")
            _progress(f"the stack is up (Kafka {stack.info.kafka_bootstrap}, S3 {stack.info.s3_endpoint}, Spark "
                      f"{stack.info.spark_master}, Toxiproxy {stack.info.toxiproxy_api}); Ctrl-C stops it")
            up = True
            _watch(stack)
    except KeyboardInterrupt:
        if not up:
            raise  # interrupted while starting: exit 130 like any interrupted command
        _progress("stopped: every process of the stack is down")
        return errors.PASSED  # Ctrl-C is how this command ends
    finally:
        if target is not None:
            target.unlink(missing_ok=True)  # its hooks name process groups that no longer exist
    return errors.PASSED


def _asker(component: str, requests: Path | None = None) -> Callable[[int, object], None]:
    """A signal handler asking for `component`'s restart, or, when a hook named servers under `requests` (a broker of
    several: chaos/target/from_stack.py restart_requests), for theirs."""
    def ask(signum: int, frame: object) -> None:
        named = []
        if requests is not None and requests.is_dir():
            for request in requests.iterdir():
                named.append(request.name)
                request.unlink(missing_ok=True)
        for name in named or [component]:
            _restarts_asked[name] = time.monotonic() + RESTART_WAIT_S
    return ask


def _restart_asked(stack) -> None:
    """Restart each server a restart hook asked for, once it is down; a request for one still running after
    RESTART_WAIT_S is dropped, with a line."""
    for name, deadline in list(_restarts_asked.items()):
        handle = stack.handles.get(name)
        if handle is not None and handle.alive() and time.monotonic() < deadline:
            continue  # still shutting down: asked again on the next poll
        _restarts_asked.pop(name, None)
        if handle is None or handle.alive():
            _progress(f"{name}: a restart was asked for, but it " + ("is not a server of this stack" if handle is None
                      else f"kept running for {RESTART_WAIT_S:.0f} s") + ": not restarted")
            continue
        try:
            seconds = stack.restart(name)
            _progress(f"{name} restarted (asked by a restart hook), ready in {seconds:.1f} s")
        except Exception as exc:  # noqa: BLE001 - said, and the stack keeps running for what is up
            _progress(f"{name} could not be restarted: {exc}")


def _watch(stack) -> None:
    """Run until interrupted, saying when a server stops or comes back (a process fault through a hook stops one;
    the stack keeps running, as a cluster would)."""
    down: set[str] = set()
    while True:
        _restart_asked(stack)
        for name, handle in stack.handles.items():
            alive = handle.alive()
            if not alive and name not in down:
                _progress(f"{name} is not running (see {handle.log_path})")
                down.add(name)
            elif alive and name in down:
                _progress(f"{name} is running again")
                down.discard(name)
        time.sleep(POLL_S)
