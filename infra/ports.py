"""Free TCP ports on loopback, chosen at run time so two stacks on one machine never collide."""
from __future__ import annotations

import socket
from contextlib import ExitStack

from .errors import InfraError


def free_ports(count: int, hosts: tuple[str, ...] = ("127.0.0.1",)) -> list[int]:
    """Return `count` distinct ports that are free on every host in `hosts` right now.

    All candidate sockets stay open until the end so the kernel never hands out the same port twice.
    A port can still be taken between this call and the server's bind; callers fail with a clear error
    naming the component then.
    """
    ports: list[int] = []
    with ExitStack() as held:
        attempts = 0
        while len(ports) < count:
            attempts += 1
            if attempts > count * 50:
                raise InfraError(f"could not find {count} free ports on {', '.join(hosts)}; free some ports")
            first = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            first.bind((hosts[0], 0))
            port = first.getsockname()[1]
            if port in ports or not all(_bindable(host, port, held) for host in hosts[1:]):
                continue
            ports.append(port)
    return ports


def _bindable(host: str, port: int, held: ExitStack) -> bool:
    probe = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    try:
        probe.bind((host, port))
        return True
    except OSError:
        return False


def listening(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
