"""A small Prometheus HTTP API client (instant and range queries) over an injected transport.

The one client of Prometheus's HTTP API: readout's queries and the rollout collector gate's.
Only what they need: ``/api/v1/query`` and ``/api/v1/query_range`` with their error envelopes
turned into errors that name the query. The base URL must be given explicitly; there is no
default server.

What goes wrong decides the exit code (``errors.ExitCode``): a server that cannot be reached,
times out or answers 5xx is :class:`~tierctl.errors.CannotJudge` (3: nothing was judged,
retry later); a server that answers but is not a Prometheus HTTP API (404, HTML, JSON without
Prometheus's envelope) or rejects the query as malformed (``bad_data``: a label or matcher
given by the operator) is an :class:`~tierctl.errors.InputError` (2); neither is 1, the code
of a failed canary. A password in the URL's userinfo is never printed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from tierctl.credentials import mask_userinfo
from tierctl.errors import CannotJudge, InputError
from tierctl.netnames import dns_name_problem


@dataclass(frozen=True)
class Series:
    """One labelled time series: timestamps (s) and values, NaN where Prometheus had none."""

    labels: dict[str, str]
    times_s: tuple[float, ...]
    values: tuple[float, ...]


def check_prometheus_url(base_url: str, *, param: str = "prometheus") -> None:
    """Refuse a Prometheus URL that no query could use: not http(s), or not a URL at all
    (``http://[::1``). The CLI checks its option with this when it reads it, so a malformed
    URL is exit 2 at once, before any rollout step or readout query.

    Raises:
        InputError: the URL, masked, naming the parameter ``param``.
    """
    if not base_url.startswith(("http://", "https://")):
        raise InputError(
            "the Prometheus URL must start with http:// or https://",
            rule="prometheus-url",
            value=mask_userinfo(base_url),
            fix=f"pass e.g. `{param}` http://127.0.0.1:9090",
            params=(param,),
        )
    try:
        httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        # Refused here, not by the first query (httpx.InvalidURL is no HTTPError): sweep
        # seed 5150301 input 15622, `readout --prometheus 'http://[::1'`.
        raise InputError(
            f"the Prometheus URL is not a valid URL: {exc}",
            rule="prometheus-url",
            value=mask_userinfo(base_url),
            fix=f"pass e.g. `{param}` http://127.0.0.1:9090",
            params=(param,),
        ) from None
    problem = dns_name_problem(urlsplit(base_url).hostname or "")
    if problem:
        # httpx raises the resolver's UnicodeError ("label too long") at the first query.
        raise InputError(
            f"the Prometheus URL's host is no DNS name: {problem}",
            rule="prometheus-url",
            value=mask_userinfo(base_url)[:120],
            fix=f"pass e.g. `{param}` http://127.0.0.1:9090",
            params=(param,),
        )


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
        check_prometheus_url(base_url)
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
            raise CannotJudge(
                # A password in the URL's userinfo is never printed.
                mask_userinfo(
                    f"cannot reach Prometheus at {self.base_url}: {type(exc).__name__}: {exc}"
                ),
                rule="prometheus-unreachable",
                fix="check that the server is up (curl URL/-/ready) and run again; nothing "
                "was judged",
            ) from None
        try:
            body = response.json()
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict) or body.get("status") not in ("success", "error"):
            if response.status_code >= 500:
                raise CannotJudge(
                    f"Prometheus at {mask_userinfo(self.base_url)} answered HTTP "
                    f"{response.status_code} for {expr!r}",
                    rule="prometheus-failing",
                    fix="wait until the server is ready (curl URL/-/ready) and run again; "
                    "nothing was judged",
                ) from None
            raise self._not_prometheus(path, response)
        if body["status"] != "success":
            kind = body.get("errorType", "")
            message = f"Prometheus rejected the query {expr!r}: {body.get('error', body)}"
            if kind in ("timeout", "canceled", "execution", "internal", "unavailable"):
                raise CannotJudge(
                    message,
                    rule=f"prometheus-{kind}",
                    fix="retry when the server is less loaded, or shorten the window; nothing "
                    "was judged",
                )
            raise InputError(
                message,
                rule="prometheus-query",
                value=kind or None,
                fix="check the metric names (a pipeline may rewrite the prefix's ':' to '_') "
                "and label names",
            )
        data = body.get("data")
        if data is None:
            raise self._not_prometheus(path, response)
        return data

    def _not_prometheus(self, path: str, response: httpx.Response) -> InputError:
        """The server answered, but not as a Prometheus HTTP API: the URL is wrong."""
        kind = response.headers.get("content-type", "no content type").split(";")[0]
        return InputError(
            f"{mask_userinfo(self.base_url)} is not a Prometheus HTTP API: {path} answered "
            f"HTTP {response.status_code} ({kind}) without Prometheus's JSON envelope",
            rule="prometheus-url",
            value=mask_userinfo(self.base_url),
            fix="pass the server's base URL, whose /api/v1/query answers (e.g. "
            "http://127.0.0.1:9090), not a page or a path below it",
        )

    def _malformed(self, path: str, expr: str) -> CannotJudge:
        """A Prometheus envelope whose data is not the shape the API documents (a result
        that is no list, a value that is no [time, "number"] pair, labels that are no
        map): nothing can be judged from it (it was a TypeError and a 500 in ``judge serve``)."""
        return CannotJudge(
            f"Prometheus at {mask_userinfo(self.base_url)} answered {path} for {expr!r} with "
            "data that is not the Prometheus HTTP API's shape",
            rule="prometheus-malformed",
            fix="check that the URL is a Prometheus (or a compatible API) and run again; "
            "nothing was judged",
        )

    def query(self, expr: str, at_s: float | None = None) -> list[tuple[dict[str, str], float]]:
        """Instant vector query: (labels, value) per series.

        Raises:
            CannotJudge: unreachable, failing, or an answer of the wrong shape.
        """
        params = {"query": expr}
        if at_s is not None:
            params["time"] = f"{at_s:.3f}"
        data = self._get("/api/v1/query", params, expr)
        try:
            if data.get("resultType") == "scalar":
                return [({}, _num(data["result"][1]))]
            return [(_labels(item["metric"]), _num(item["value"][1])) for item in data["result"]]
        except (AttributeError, KeyError, IndexError, TypeError, ValueError):
            raise self._malformed("/api/v1/query", expr) from None

    def query_range(self, expr: str, start_s: float, end_s: float, step_s: float) -> list[Series]:
        """Range query; each series is returned on its own timestamps.

        Raises:
            CannotJudge: unreachable, failing, or an answer of the wrong shape.
        """
        params = {
            "query": expr,
            "start": f"{start_s:.3f}",
            "end": f"{end_s:.3f}",
            "step": f"{step_s:g}",
        }
        data = self._get("/api/v1/query_range", params, expr)
        out = []
        try:
            for item in data["result"]:
                times = tuple(float(t) for t, _ in item["values"])
                values = tuple(_num(v) for _, v in item["values"])
                out.append(Series(_labels(item["metric"]), times, values))
        except (AttributeError, KeyError, IndexError, TypeError, ValueError):
            raise self._malformed("/api/v1/query_range", expr) from None
        return out

    def metric_names(self) -> set[str]:
        """Every metric name the server knows (for detecting the engine and its prefix)."""
        data = self._get("/api/v1/label/__name__/values", {}, "__name__ values")
        if not isinstance(data, list) or not all(isinstance(n, str) for n in data):
            raise self._malformed("/api/v1/label/__name__/values", "__name__ values")
        return set(data)


def _labels(metric: Any) -> dict[str, str]:
    if not isinstance(metric, dict) or not all(isinstance(v, str) for v in metric.values()):
        raise TypeError("labels are a map of strings")
    return metric


def _num(text: str) -> float:
    if not isinstance(text, str | int | float) or isinstance(text, bool):
        raise TypeError("a sample value is a number's text")
    value = float(text)
    return value if math.isfinite(value) else math.nan
