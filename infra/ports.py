"""Free TCP ports on loopback, chosen at run time so two stacks on one machine never collide.

They come from below the kernel's ephemeral range: a port the kernel hands out for `bind(0)` is one it also hands
to outgoing connections, so between the choice and the server's bind any client (another lane's Kafka consumer, a
proxy's upstream connection) could take it. That happened: a Spark worker of a two-lane smoke found its port taken,
bound the next one, and never counted as ready (2026-11-28).

A port chosen is also reserved on this machine for RESERVED_S (a file in RESERVATIONS, created exclusively under a
lock): stacks starting at once (three test workers, two lanes) choose before any of them binds, and without the
reservation two chose the same port (a Kafka broker's "Address already in use", 2026-11-28).
"""
from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from .errors import InfraError

RESERVATIONS = Path(tempfile.gettempdir()) / "chaos-port-reservations"
RESERVED_S = 600.0  # longer than any stack takes from choosing its ports to binding them

LOWEST_PORT = 10_000  # above the well-known and registered ports most local services use
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def listening_range() -> tuple[int, int]:
    """The ports to choose from: LOWEST_PORT up to the kernel's first ephemeral port (exclusive); the kernel's
    default first port (32768) where the range cannot be read."""
    try:
        first = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32_768
    return LOWEST_PORT, max(first, LOWEST_PORT + 1_000)


def free_ports(count: int, hosts: tuple[str, ...] = ("127.0.0.1",)) -> list[int]:
    """Return `count` distinct ports that are free on every host in `hosts` right now.

    All candidate sockets stay open until the end so the kernel never hands out the same port twice.
    A port can still be taken between this call and the server's bind; callers fail with a clear error
    naming the component then.
    """
    low, high = listening_range()
    chooser = random.SystemRandom()  # two stacks starting together must not walk the same sequence
    ports: list[int] = []
    with ExitStack() as held, _reservations_locked() as reserved:
        attempts = 0
        while len(ports) < count:
            attempts += 1
            if attempts > count * 50:
                raise InfraError(f"could not find {count} free ports on {', '.join(hosts)} in {low}-{high - 1}; "
                                 "free some ports")
            port = chooser.randrange(low, high)
            if port in ports or port in reserved or not all(_bindable(host, port, held) for host in hosts):
                continue
            ports.append(port)
        for port in ports:
            (RESERVATIONS / str(port)).write_text(str(os.getpid()))
    return ports


class _reservations_locked:
    """The ports reserved in the last RESERVED_S, read (and the older reservations removed) under an exclusive lock
    that is held until the new ones are written."""

    def __enter__(self) -> set[int]:
        RESERVATIONS.mkdir(parents=True, exist_ok=True)
        self.lock = open(RESERVATIONS / ".lock", "w")  # noqa: SIM115 (held until __exit__)
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        reserved, now = set(), time.time()
        for path in RESERVATIONS.iterdir():
            if not path.name.isdigit():
                continue
            try:
                if now - path.stat().st_mtime < RESERVED_S:
                    reserved.add(int(path.name))
                else:
                    path.unlink()
            except FileNotFoundError:
                pass
        return reserved

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.lock, fcntl.LOCK_UN)
        self.lock.close()


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
