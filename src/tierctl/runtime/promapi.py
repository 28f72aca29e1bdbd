"""A small Prometheus HTTP API client (instant and range queries) over an injected transport.

The one client of Prometheus's HTTP API: readout's queries and the rollout collector gate's.
Only what they need: ``/api/v1/query`` and ``/api/v1/query_range`` with
their error envelopes turned into :class:`~tierctl.errors.RuntimeFailure` messages that name
the query. The base URL must be given explicitly; there is no default server.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import httpx

from tierctl.credentials import mask_userinfo
from tierctl.errors import InputError, RuntimeFailure


@dataclass(frozen=True)
class Series:
    """One labelled time series: timestamps (s) and values, NaN where Prometheus had none."""

    labels: dict[str, str]
    times_s: tuple[float, ...]
    values: tuple[float, ...]


class PrometheusClient:
    """Query a Prometheus server.

    Args:
        base_url: e.g. ``http://127.0.0.1:9090``.
        transport: an httpx transport (tests may inject one); default a real connection.
        timeout_s: per-request timeout.
        http: an httpx client to send through instead of a new one (a rollout's gates share
            the executor's); it is left open by :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise InputError(
                "the Prometheus URL must start with http:// or https://",
                rule="prometheus-url",
                value=mask_userinfo(base_url),
                fix="pass e.g. `prometheus` http://127.0.0.1:9090",
                params=("prometheus",),
            )
        self.base_url = base_url.rstrip("/")
        self._owned = http is None
        self._client = http or httpx.Client(transport=transport, timeout=timeout_s)
        self._timeout_s = timeout_s

    def close(self) -> None:
        """Close the connection pool (unless the client was passed in)."""
        if self._owned:
            self._client.close()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, path: str, params: dict[str, str], expr: str) -> Any:
        try:
            response = self._client.get(
                self.base_url + path, params=params, timeout=self._timeout_s
            )
        except httpx.HTTPError as exc:
            raise RuntimeFailure(
                # A password in the URL's userinfo is never printed.
                mask_userinfo(f"cannot reach Prometheus at {self.base_url}: {exc}"),
                rule="prometheus-unreachable",
                fix="check the URL and that the server is up (curl URL/-/ready)",
            ) from None
        try:
            body = response.json()
        except ValueError:
            raise RuntimeFailure(
                f"Prometheus answered HTTP {response.status_code} without JSON for {expr!r}",
                rule="prometheus-response",
            ) from None
        if body.get("status") != "success":
            raise RuntimeFailure(
                f"Prometheus rejected the query {expr!r}: {body.get('error', body)}",
                rule="prometheus-query",
                fix="check the metric names (a pipeline may rewrite the prefix's ':' to '_') "
                "and label names",
            )
        return body["data"]

    def query(self, expr: str, at_s: float | None = None) -> list[tuple[dict[str, str], float]]:
        """Instant vector query: (labels, value) per series."""
        params = {"query": expr}
        if at_s is not None:
            params["time"] = f"{at_s:.3f}"
        data = self._get("/api/v1/query", params, expr)
        if data.get("resultType") == "scalar":
            return [({}, _num(data["result"][1]))]
        return [(item["metric"], _num(item["value"][1])) for item in data["result"]]

    def query_range(self, expr: str, start_s: float, end_s: float, step_s: float) -> list[Series]:
        """Range query; each series is returned on its own timestamps."""
        params = {
            "query": expr,
            "start": f"{start_s:.3f}",
            "end": f"{end_s:.3f}",
            "step": f"{step_s:g}",
        }
        data = self._get("/api/v1/query_range", params, expr)
        out = []
        for item in data["result"]:
            times = tuple(float(t) for t, _ in item["values"])
            values = tuple(_num(v) for _, v in item["values"])
            out.append(Series(item["metric"], times, values))
        return out

    def metric_names(self) -> set[str]:
        """Every metric name the server knows (for detecting the engine and its prefix)."""
        data = self._get("/api/v1/label/__name__/values", {}, "__name__ values")
        return set(data)


def _num(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else math.nan
