"""Inference proxies tierctl can launch and read: the real router in front of a tier's replicas.

- :mod:`tierctl.proxies.sglang_router`: the SGLang model gateway (``sglang-router`` on PyPI),
  launched with the tier's worker URLs and health-check settings; its worker health and request
  counters read back over HTTP, and its workers removed and added again around a rollout step
  (:class:`ProxyAdmin`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class ProxyAdmin(Protocol):
    """What a rollout asks of the proxy in front of the replicas: take one replica out of
    rotation before it is stopped, and put it back once it serves again."""

    url: str

    def worker_for_port(self, port: int) -> str | None:
        """The proxy's backend URL for the replica listening on ``port``, if exactly one."""
        ...

    def drain(self, url: str, *, timeout_s: float) -> None:
        """Route no new request to ``url``."""
        ...

    def restore(self, url: str, *, timeout_s: float) -> None:
        """Route to ``url`` again once the proxy's probe passes."""
        ...


def proxy_admin(argv: Sequence[str], host: str) -> ProxyAdmin | None:
    """The admin client for a proxy service's rendered command (None: a proxy tierctl cannot
    steer, e.g. nginx; its own health checks are then all that keeps traffic off a stopped
    replica)."""
    from tierctl.proxies.sglang_router import admin_client

    return admin_client(argv, host)
