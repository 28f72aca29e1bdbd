"""``tierctl judge serve``: the readout as an HTTP judge for Argo Rollouts and Flagger.

Both orchestrators can ask a web endpoint whether a canary may go on; neither knows TTFT or
TPOT, nor that the replicas really differ in the intended flags. This server answers them
with tierctl's readout (the same paired statistics and verdict as ``tierctl readout``):

- ``GET|POST /argo``: Argo Rollouts' web metric provider. The answer is always 200 with the
  verdict JSON (``{"verdict": "pass"|"fail"|"inconclusive", ...}``); an AnalysisTemplate reads
  it with ``jsonPath: "{$.verdict}"``, ``successCondition: result == "pass"`` and
  ``failureCondition: result == "fail"``, so an inconclusive readout is neither (Argo's
  inconclusive). A ``window`` (``30m``) may come in the query or the JSON body.
- ``POST /flagger``: Flagger's webhook (``{"name", "namespace", "phase", "metadata": {...}}``).
  Flagger advances on 2xx and counts anything else as a failed check: 200 pass, 409 fail,
  503 inconclusive (not judged: the check is retried at the next interval). The window may
  come in ``metadata.window``.
- ``GET /healthz``: 200 while the server runs.

A readout that cannot read Prometheus (:class:`~tierctl.errors.CannotJudge`) is inconclusive,
never a pass; a bad window is a 400 naming it.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tierctl.engines import profile_for
from tierctl.errors import CannotJudge, InputError
from tierctl.readout.analysis import arms_from_tier, run_readout
from tierctl.runtime.promapi import PrometheusClient
from tierctl.spec.effective import Tier

if TYPE_CHECKING:
    from aiohttp import web

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: Flagger's status for each verdict (it advances on 2xx only).
FLAGGER_STATUS = {"pass": 200, "fail": 409, "inconclusive": 503}


@dataclass(frozen=True)
class JudgeSettings:
    """What every judgement uses unless the request says otherwise.

    Attributes:
        prometheus: Prometheus base URL.
        window_s: Default window, seconds back from now.
        step_s: Step and rate window.
        control, canary: Replica names (None: the spec's roles).
        label: The scrape label naming each replica's service.
        tolerance: Relative change treated as none.
        min_requests: Per arm per step to compare it.
        now: The clock (a seam: tests judge a fixed window).
        body_timeout_s: How long a client may take to send its body (408 past it).
    """

    prometheus: str
    window_s: float = 1800.0
    step_s: float = 300.0
    control: str | None = None
    canary: str | None = None
    label: str = "container_name"
    tolerance: float = 0.05
    min_requests: float = 3.0
    now: Callable[[], float] = field(default=time.time)
    body_timeout_s: float = 30.0


def window_seconds(text: str) -> float:
    """``90s``, ``30m``, ``24h``, ``2d`` -> seconds (the readout then bounds its steps).

    Raises:
        InputError: not a positive duration (or longer than 32 characters).
    """
    match = _DURATION.match(text.strip()) if len(text) <= 32 else None
    if not match or float(match.group(1)) <= 0:
        raise InputError(
            f"window {text[:32]!r} is not a positive duration",
            rule="a readout window is a number and a unit",
            value=text[:32],
            fix="write 90s, 30m, 24h or 2d",
        )
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def judge(tier: Tier, settings: JudgeSettings, window_s: float | None = None) -> dict[str, Any]:
    """One readout over the window ending now, as the verdict JSON both endpoints answer."""
    window = window_s if window_s is not None else settings.window_s
    end = settings.now()
    control, canary = arms_from_tier(tier, settings.control, settings.canary, settings.label)
    base: dict[str, Any] = {
        "window_s": window,
        "end_s": end,
        "control": {"replica": control.replica},
        "canary": {"replica": canary.replica},
    }
    try:
        with PrometheusClient(settings.prometheus) as client:
            result = run_readout(
                client,
                control,
                canary,
                start_s=end - window,
                end_s=end,
                step_s=settings.step_s,
                engine=profile_for(tier.spec.engine.kind),
                variant_label=tier.spec.telemetry.label,
                min_requests_per_step=settings.min_requests,
                tolerance=settings.tolerance,
            )
    except CannotJudge as exc:
        return {**base, "verdict": "inconclusive", "reasons": [exc.message]}
    doc = result.to_dict()
    return {**base, **doc, "verdict": str(doc["verdict"])}


#: The bounds of a request: a body of at most 64 KiB (413 past it), nested at most 8 levels
#: (Flagger's payload is two), a window of at most 32 characters, and through the readout at
#: most ``analysis.MAX_STEPS`` steps: each a 4xx with its rule. The headers' deadline and size
#: and the connections are :mod:`tierctl.runtime.http_guard`'s.
MAX_BODY_BYTES = 64 * 1024
MAX_BODY_DEPTH = 8
#: Readouts run at once (each a thread and up to MAX_STEPS points per series in memory); one
#: more is 429 at once: an orchestrator asks once an interval, a flood is no orchestrator.
MAX_JUDGEMENTS = 4


class _Refusal(Exception):
    """A request refused with ``status`` (a 4xx) and a rule."""

    def __init__(self, status: int, message: str, rule: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.rule = rule


async def _json_body(request: Any, timeout_s: float) -> dict[str, Any]:
    """The request's JSON object (``{}`` without a body), bounded as above.

    Raises:
        InputError: not UTF-8 JSON, or past the depth or number bounds.
        _Refusal: over the size bound (413) or later than the deadline (408).
    """
    import dataclasses

    from tierctl.readers import Limits, load_json
    from tierctl.runtime.http_guard import BodyTooLarge, read_body

    if not request.can_read_body:
        return {}
    try:
        raw = await read_body(request, MAX_BODY_BYTES, None, timeout_s)
    except BodyTooLarge as exc:
        raise _Refusal(
            413,
            f"the body is larger than {MAX_BODY_BYTES} bytes (refused at {exc.seen})",
            f"a judge request body is at most {MAX_BODY_BYTES} bytes",
        ) from None
    except TimeoutError:
        raise _Refusal(
            408,
            f"the body did not arrive within {timeout_s:g} s",
            f"a request body arrives within {timeout_s:g} s",
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("the body is not JSON", rule="a request body is UTF-8 JSON") from None
    limits = dataclasses.replace(Limits.config(), max_depth=MAX_BODY_DEPTH)
    doc = load_json(text, "request body", limits=limits)
    return doc if isinstance(doc, dict) else {}


def _refused(exc: InputError) -> web.Response:
    from aiohttp import web

    body = {"error": exc.message, **({"rule": exc.rule} if exc.rule else {})}
    return web.json_response(body, status=400)


def _window_of(values: dict[str, Any]) -> float | None:
    text = values.get("window")
    return window_seconds(str(text)) if text is not None else None


def _answer(exc: InputError | _Refusal) -> web.Response:
    from aiohttp import web

    if isinstance(exc, InputError):
        return _refused(exc)
    resp = web.json_response({"error": exc.message, "rule": exc.rule}, status=exc.status)
    if exc.status in (408, 413):
        resp.force_close()  # the rest of the body is never read
    return resp


def judge_app(tier: Tier, settings: JudgeSettings) -> Any:
    """The aiohttp application of the three endpoints (the readout runs in a thread, at most
    :data:`MAX_JUDGEMENTS` at once)."""
    from aiohttp import web

    from tierctl.runtime.http_guard import next_request_headers

    running = 0

    async def verdict(values: dict[str, Any]) -> dict[str, Any]:
        nonlocal running
        window = _window_of(values)
        if running >= MAX_JUDGEMENTS:
            raise _Refusal(
                429,
                f"{running} readouts are running",
                f"at most {MAX_JUDGEMENTS} readouts run at once; ask again at the next interval",
            )
        running += 1
        try:
            return await asyncio.to_thread(judge, tier, settings, window)
        finally:
            running -= 1

    async def argo(request: web.Request) -> web.Response:
        try:
            values = {**(await _json_body(request, settings.body_timeout_s)), **dict(request.query)}
            doc = await verdict(values)
        except (InputError, _Refusal) as exc:
            return _answer(exc)
        return web.json_response(doc)

    async def flagger(request: web.Request) -> web.Response:
        try:
            payload = await _json_body(request, settings.body_timeout_s)
            metadata = payload.get("metadata")
            values = dict(metadata) if isinstance(metadata, dict) else {}
            doc = await verdict(values)
        except (InputError, _Refusal) as exc:
            return _answer(exc)
        doc["phase"] = payload.get("phase")
        doc["canary_name"] = payload.get("name")
        return web.json_response(doc, status=FLAGGER_STATUS[doc["verdict"]])

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    # aiohttp's own size bound stays as a backstop (read_body refuses first, with the rule).
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[next_request_headers])
    app.router.add_route("GET", "/argo", argo)
    app.router.add_route("POST", "/argo", argo)
    app.router.add_route("POST", "/flagger", flagger)
    app.router.add_route("GET", "/healthz", healthz)
    return app
