"""An engine's ``/metrics`` text, from a saved dump or from the live endpoint.

A source is a path (a Prometheus text exposition saved with ``curl .../metrics > m.txt``) or
an ``http://``/``https://`` URL, read once with a bounded time-out and size. The text is then
parsed by :func:`tierctl.runtime.promtext.parse_metrics`.
"""

from __future__ import annotations

import httpx

from tierctl.errors import InputError, Location
from tierctl.readers import read_text

#: The most of a live ``/metrics`` answer read (an engine's is a few hundred KB).
MAX_METRICS_BYTES = 32 * 1024 * 1024


def is_url(source: str) -> bool:
    """Whether ``source`` names a live endpoint rather than a file."""
    return source.startswith(("http://", "https://"))


def read_metrics_text(source: str, *, timeout_s: float = 10.0) -> str:
    """The Prometheus text at ``source`` (a file, or a URL fetched once).

    Raises:
        InputError: the file cannot be read, or the URL does not answer 200 with text
            (the status or the connection error is named).
    """
    if not is_url(source):
        return read_text(source, what="metrics dump")
    loc = Location(file=source)
    try:
        with httpx.stream("GET", source, timeout=timeout_s) as response:
            if response.status_code != 200:
                raise InputError(
                    f"{source} answered HTTP {response.status_code}",
                    location=loc,
                    rule="a metrics source answers 200 with the Prometheus text format",
                    value=response.status_code,
                    fix="give the engine's /metrics URL (SGLang needs --enable-metrics), or a "
                    "saved dump",
                )
            body = bytearray()
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if len(body) > MAX_METRICS_BYTES:
                    raise InputError(
                        f"{source} sent more than {MAX_METRICS_BYTES // 2**20} MiB",
                        location=loc,
                        rule=f"a metrics answer is at most {MAX_METRICS_BYTES // 2**20} MiB",
                        fix="point at the engine's /metrics, not a larger document",
                    )
    except httpx.HTTPError as exc:
        raise InputError(
            f"{source} did not answer ({type(exc).__name__})",
            location=loc,
            rule="a live metrics source must answer within the time-out",
            value=str(exc)[:200],
            fix="check the engine is up and the address is its /metrics, or save a dump",
        ) from None
    return body.decode("utf-8", errors="replace")
