"""toxiproxy-python, wrapped for what it lacks.

The library keeps the server address in class-level globals (APIConsumer.host/port), calls `requests`
without timeouts, lets 5xx answers pass silently and returns nothing from add_toxic. This wrapper binds
the address per call under a lock (two stacks in one process stay apart), gives every HTTP call a
timeout, turns transport errors and 5xx into InfraError, and reads toxics back to confirm them.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass

import requests
import toxiproxy.api as toxiproxy_api
from toxiproxy import Toxiproxy
from toxiproxy.proxy import Proxy

from .errors import InfraError

_BIND_LOCK = threading.RLock()


class _TimedRequests:
    """Stands in for the `requests` module inside toxiproxy.api while a call is bound."""

    def __init__(self, timeout: float, server: str):
        self.timeout = timeout
        self.server = server

    def _call(self, method, url, **kwargs):
        kwargs.setdefault("timeout", self.timeout)
        try:
            response = method(url=url, **kwargs)
        except requests.RequestException as error:
            raise InfraError(f"toxiproxy at {self.server} did not answer {url}: {type(error).__name__}") from error
        if response.status_code >= 500:
            raise InfraError(f"toxiproxy at {self.server} failed {url}: HTTP {response.status_code} "
                             f"{response.text.strip()[:200]}")
        return response

    def get(self, url, **kwargs):
        return self._call(requests.get, url, **kwargs)

    def post(self, url, **kwargs):
        return self._call(requests.post, url, **kwargs)

    def delete(self, url, **kwargs):
        return self._call(requests.delete, url, **kwargs)


@dataclass(frozen=True)
class ToxicState:
    name: str
    type: str
    stream: str
    toxicity: float
    attributes: dict


class ToxiproxyClient:
    def __init__(self, host: str, port: int, timeout: float = 5.0):
        self.host = host
        self.port = port
        self._requests = _TimedRequests(timeout, f"{host}:{port}")

    @contextmanager
    def _bound(self):
        with _BIND_LOCK:
            consumer = toxiproxy_api.APIConsumer
            saved = consumer.host, consumer.port, toxiproxy_api.requests
            consumer.host, consumer.port, toxiproxy_api.requests = self.host, self.port, self._requests
            try:
                yield Toxiproxy()
            finally:
                consumer.host, consumer.port, toxiproxy_api.requests = saved

    def version(self) -> str:
        with self._bound():
            return toxiproxy_api.APIConsumer.get("/version").text.strip()

    def create_proxy(self, name: str, listen: str, upstream: str) -> Proxy:
        with self._bound() as server:
            return server.create(upstream=upstream, name=name, listen=listen, enabled=True)

    def proxies(self) -> dict[str, Proxy]:
        with self._bound() as server:
            return server.proxies()

    def proxy(self, name: str) -> Proxy:
        with self._bound() as server:
            found = server.get_proxy(name)
        if found is None:
            raise InfraError(f"toxiproxy at {self.host}:{self.port} has no proxy named {name!r}")
        return found

    def set_enabled(self, proxy_name: str, enabled: bool) -> None:
        proxy = self.proxy(proxy_name)
        with self._bound():
            proxy.enable() if enabled else proxy.disable()
        if self.proxy(proxy_name).enabled != enabled:
            raise InfraError(f"toxiproxy did not {'enable' if enabled else 'disable'} proxy {proxy_name!r}")

    def add_toxic(self, proxy_name: str, name: str, type: str, attributes: dict, stream: str = "downstream",
                  toxicity: float = 1.0) -> ToxicState:
        proxy = self.proxy(proxy_name)
        with self._bound():
            proxy.add_toxic(name=name, type=type, stream=stream, toxicity=toxicity, attributes=attributes)
        state = self.toxics(proxy_name).get(name)
        if state is None:
            raise InfraError(f"toxiproxy did not keep toxic {name!r} on proxy {proxy_name!r}")
        return state

    def remove_toxic(self, proxy_name: str, name: str) -> None:
        proxy = self.proxy(proxy_name)
        with self._bound():
            if proxy.get_toxic(name) is not None:
                proxy.destroy_toxic(name)

    def toxics(self, proxy_name: str) -> dict[str, ToxicState]:
        proxy = self.proxy(proxy_name)
        with self._bound():
            found = proxy.toxics()
        return {name: ToxicState(t.name, t.type, t.stream, t.toxicity, dict(t.attributes))
                for name, t in found.items()}

    def reset(self) -> None:
        """Remove every toxic and re-enable every proxy (the server's own /reset)."""
        with self._bound() as server:
            server.reset()
