"""Wait strategies: poll a readiness check until it holds, a deadline passes, or the process dies."""
from __future__ import annotations

import time
from collections.abc import Callable

import requests

from .errors import ComponentError


def wait_until(component: str, ready: Callable[[], bool], timeout: float, log_path, alive: Callable[[], bool],
               interval: float = 0.1) -> float:
    """Return seconds waited; raise ComponentError naming the component and its log otherwise."""
    start = time.monotonic()
    while True:
        try:
            if ready():
                return time.monotonic() - start
        except Exception:  # a readiness probe failing is the normal "not yet"
            pass
        if not alive():
            raise ComponentError(f"{component} exited during start; see {log_path}")
        if time.monotonic() - start > timeout:
            raise ComponentError(f"{component} was not ready within {timeout:.0f} s; see {log_path}")
        time.sleep(interval)


def http_ok(url: str, timeout: float = 1.0, verify: str | bool = True) -> bool:
    """`verify`: True (the system's CAs), or the PEM of the CA an https:// server's certificate is signed by."""
    return requests.get(url, timeout=timeout, verify=verify).status_code == 200
