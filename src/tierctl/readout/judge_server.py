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
#: most ``analysis.MAX_STEPS`` steps: each a 400 with its rule.
MAX_BODY_BYTES = 64 * 1024
MAX_BODY_DEPTH = 8
#: How long a client may take to send its body (a slow client holds no handler longer: 408).
BODY_TIMEOUT_S = 30.0


async def _json_body(request: Any) -> dict[str, Any]:
    """The request's JSON object (``{}`` without a body), bounded as above.

    Raises:
        InputError: not UTF-8 JSON, or past the depth or number bounds.
    """
    import dataclasses

    from aiohttp import web

    from tierctl.readers import Limits, load_json

    if not request.can_read_body:
        return {}
    try:
        raw = await asyncio.wait_for(request.read(), BODY_TIMEOUT_S)
    except TimeoutError:
        raise web.HTTPRequestTimeout(
            text=f"the body did not arrive within {BODY_TIMEOUT_S:g} s"
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


def judge_app(tier: Tier, settings: JudgeSettings) -> Any:
    """The aiohttp application of the three endpoints (the readout runs in a thread)."""
    from aiohttp import web

    async def verdict(values: dict[str, Any]) -> dict[str, Any]:
        window = _window_of(values)
        return await asyncio.to_thread(judge, tier, settings, window)

    async def argo(request: web.Request) -> web.Response:
        try:
            values = {**(await _json_body(request)), **dict(request.query)}
            doc = await verdict(values)
        except InputError as exc:
            return _refused(exc)
        return web.json_response(doc)

    async def flagger(request: web.Request) -> web.Response:
        try:
            payload = await _json_body(request)
            metadata = payload.get("metadata")
            values = dict(metadata) if isinstance(metadata, dict) else {}
            doc = await verdict(values)
        except InputError as exc:
            return _refused(exc)
        doc["phase"] = payload.get("phase")
        doc["canary_name"] = payload.get("name")
        return web.json_response(doc, status=FLAGGER_STATUS[doc["verdict"]])

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_route("GET", "/argo", argo)
    app.router.add_route("POST", "/argo", argo)
    app.router.add_route("POST", "/flagger", flagger)
    app.router.add_route("GET", "/healthz", healthz)
    return app
