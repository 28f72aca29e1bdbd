"""Take an engine replica out of the proxy before its step stops it, and back in after.

Without this, a stopped replica keeps receiving requests until the proxy's health probe has
missed it enough times (the design's router: every 2-5 s, unhealthy after 3 misses), and a
request routed to it in that window fails. Measured on the real tier (vLLM on CPU behind
sglang-router 0.3.2): one request in 5,000 answered 500 during a rollout that relied on the
probe alone.

The proxy is the plan's ``proxy`` service in the NEW file, when :func:`tierctl.proxies.proxy_admin`
knows how to steer it (sglang-router's ``/workers`` API). The replica's backend is the proxy's
worker on the replica's ``--port``. Each drain and restore is journaled (``proxy-drained``,
``proxy-restored``), so a resumed rollout puts back a replica an interrupted one took out.
Where there is no steerable proxy, or it cannot be reached, the step says so in its notes and
goes on as before (the proxy's probe is then what protects traffic).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from tierctl.errors import RuntimeFailure
from tierctl.proxies import ProxyAdmin, proxy_admin
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.plan_schema import Plan, Step


@dataclass(frozen=True)
class Drained:
    """A replica taken out of the proxy: where to put it back."""

    proxy: ProxyAdmin
    worker: str


def find_admin(plan: Plan, new: Deployment, engine_url: str) -> ProxyAdmin | None:
    """The admin client of the plan's proxy service, reached on the engines' host."""
    host = urlsplit(engine_url).hostname or "127.0.0.1"
    for change in plan.services:
        if change.role == "proxy" and change.service in new.services:
            admin = proxy_admin(new.argv(change.service), host)
            if admin is not None:
                return admin
    return None


def drain(
    step: Step, admin: ProxyAdmin, port: int, timeout_s: float, known: str | None
) -> tuple[Drained | None, str]:
    """Take the step's replica (listening on ``port``) out of the proxy.

    ``known`` is the worker an interrupted run of this step already took out (from the
    journal): it is not listed any more, and is put back after the step.

    Returns:
        What to restore (None: nothing was taken out) and a note for the step.
    """
    try:
        worker = admin.worker_for_port(port)
        if worker is None and known is not None:
            return Drained(admin, known), f"proxy: {known} already out of {admin.url}"
        if worker is None:
            return None, (
                f"proxy: no worker on port {port} at {admin.url}; {step.service} not drained"
            )
        admin.drain(worker, timeout_s=timeout_s)
    except (httpx.HTTPError, ValueError) as exc:
        # ValueError: something else answers on the proxy's port (not a worker list).
        return None, (
            f"proxy: {admin.url} not reachable as the proxy ({type(exc).__name__}); "
            f"{step.service} not drained (the proxy's health probe is what keeps traffic off it)"
        )
    return Drained(admin, worker), f"proxy: {worker} drained from {admin.url}"


def restore(drained: Drained, timeout_s: float) -> str:
    """Put a drained replica back in the proxy and wait until the proxy routes to it.

    Raises:
        RuntimeFailure: the proxy refused it, or did not mark it healthy in ``timeout_s``.
    """
    try:
        drained.proxy.restore(drained.worker, timeout_s=timeout_s)
    except (httpx.HTTPError, ValueError) as exc:
        raise RuntimeFailure(
            f"could not put {drained.worker} back in the proxy at {drained.proxy.url}: "
            f"{type(exc).__name__}",
            rule="a replica taken out of the proxy for its step is put back after it",
            fix=f'register it by hand: POST {drained.proxy.url}/workers {{"url": '
            f'"{drained.worker}"}}',
        ) from None
    return f"proxy: {drained.worker} back in {drained.proxy.url}"
