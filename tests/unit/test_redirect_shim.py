"""The redirect shim (infra/shims/redirect.c) built as `chaos setup` builds it, preloaded into a Python child: its
connections to a listed loopback port land on the paired port, anything else goes where it was sent. Needs only a
C compiler."""
from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from infra import artifacts

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler to build the shim")

CONNECT = """
import socket, sys
family, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET6 if family == "6" else socket.AF_INET)
s.settimeout(5)
try:
    s.connect((host, port))
except ConnectionRefusedError:
    sys.exit(3)
s.sendall(b"hello")
s.close()
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    library = artifacts.shims()["redirect"]
    artifacts._build_shim(library, cache, progress=lambda message: None)
    return library.path(cache)


def _closed_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _connect(shim: Path, redirect: str, family: str, host: str, port: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CONNECT, family, host, str(port)], capture_output=True, text=True,
                          timeout=20, env={"LD_PRELOAD": str(shim), "CHAOS_REDIRECT": redirect})


@pytest.mark.parametrize("family,host,listen", [("4", "127.0.0.1", "127.0.0.1"),
                                                ("4", "127.0.0.2", "127.0.0.2"),  # the driver's advertised host
                                                ("6", "::ffff:127.0.0.1", "127.0.0.1")])  # Java's dual-stack form
def test_a_listed_loopback_port_is_redirected_to_its_pair(shim, family, host, listen):
    with socket.socket() as server:
        server.bind((listen, 0))
        server.listen(1)
        server.settimeout(10)
        wanted = _closed_port(listen)
        done = _connect(shim, f"1:2,{wanted}:{server.getsockname()[1]}", family, host, wanted)
        assert done.returncode == 0, done.stderr
        connection, _ = server.accept()
        with connection:
            assert connection.recv(16) == b"hello"


def test_an_unlisted_port_goes_where_it_was_sent(shim):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        unlisted = _closed_port()
        done = _connect(shim, f"{_closed_port()}:{server.getsockname()[1]}", "4", "127.0.0.1", unlisted)
        assert done.returncode == 3, done.stderr  # refused: nothing listens where it was sent


def test_a_malformed_setting_ends_the_process_loudly(shim):
    done = _connect(shim, "80-81", "4", "127.0.0.1", 1)
    assert done.returncode == 97 and "CHAOS_REDIRECT" in done.stderr
