"""Wait strategies and port selection: the pure parts of starting components."""
from __future__ import annotations

import os
import socket
import time

import pytest

from infra.errors import ComponentError, InfraError
from infra.health import wait_until
from infra.ports import free_ports, listening


def test_dead_component_is_named_with_its_log(tmp_path):
    with pytest.raises(ComponentError, match=r"^demo exited during start; see .*demo.log$"):
        wait_until("demo", ready=lambda: False, timeout=5, log_path=tmp_path / "demo.log", alive=lambda: False)


def test_slow_component_times_out_with_its_log(tmp_path):
    started = time.monotonic()
    with pytest.raises(ComponentError, match=r"^demo was not ready within 0 s; see .*demo.log$"):
        wait_until("demo", ready=lambda: False, timeout=0.3, log_path=tmp_path / "demo.log", alive=lambda: True)
    assert time.monotonic() - started < 2


def test_probe_exceptions_mean_not_ready_yet(tmp_path):
    calls = []

    def flaky() -> bool:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("not listening yet")
        return True

    assert wait_until("demo", flaky, timeout=5, log_path=tmp_path / "x", alive=lambda: True, interval=0.01) >= 0
    assert len(calls) == 3


def test_free_ports_are_distinct_and_bindable_on_every_host():
    ports = free_ports(12, hosts=("127.0.0.1", "127.0.0.2"))
    assert len(set(ports)) == 12
    for port in ports:
        for host in ("127.0.0.1", "127.0.0.2"):
            with socket.socket() as probe:
                probe.bind((host, port))


def test_free_ports_lie_below_the_kernels_ephemeral_range_where_no_outgoing_connection_takes_them():
    """A port from bind(0) is one an outgoing connection can take before the server binds it (a Spark worker of a
    two-lane smoke lost its port that way): listening ports come from below the ephemeral range."""
    from infra.ports import LOWEST_PORT, listening_range

    low, high = listening_range()
    first_ephemeral = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    assert low == LOWEST_PORT and high <= max(first_ephemeral, LOWEST_PORT + 1_000)
    assert all(low <= port < high for port in free_ports(40))


def test_a_port_chosen_is_reserved_so_a_stack_starting_beside_gets_others(tmp_path, monkeypatch):
    """Two stacks choosing at once see every port free until one binds: a port one chose is not chosen again while
    its reservation lasts, and an expired reservation is removed."""
    import infra.ports as ports_module

    monkeypatch.setattr(ports_module, "RESERVATIONS", tmp_path)
    monkeypatch.setattr(ports_module, "listening_range", lambda: (20_000, 20_040))
    first = free_ports(20)
    second = free_ports(20)
    assert not set(first) & set(second)  # without the reservations, 40 picks of 40 ports overlap almost surely
    assert {int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()} == set(first) | set(second)
    stale = tmp_path / str(first[0])
    os.utime(stale, (0, 0))
    with pytest.raises(InfraError):
        free_ports(2)  # one port free again (the stale one), two asked for
    assert not stale.exists()


def test_listening_sees_a_listener_and_its_absence():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert listening("127.0.0.1", port)
    assert not listening("127.0.0.1", port)
