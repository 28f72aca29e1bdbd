"""``tierctl sim serve``: an OpenAI-compatible engine server driven by the scheduler model.

aiohttp.web serves the API on one event loop, like SGLang's tokenizer manager: prompts are
tokenized on that loop by default (so a burst of huge prompts stalls ``/health``, as in the
field report) or, with ``--enable-dynamic-batch-tokenizer``, through the batching queue onto
one worker thread. aiohttp was chosen over starlette+uvicorn because it is already a
dependency of the ``sim`` extra, streams with one write per token without a framework layer in
between, and lets a handler read a body chunk by chunk (the bounded
:func:`tierctl.runtime.http_guard.read_body`, shared with the agent and the judge).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tierctl.errors import RuntimeFailure
from tierctl.runtime.http_guard import (
    BodyTooLarge,
    BusyClock,
    ClientBounds,
    GuardedSite,
    next_request_headers,
    read_body,
)
from tierctl.runtime.polling import wait_until_async
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.driver import EngineDriver
from tierctl.sim.engine import make_scheduler
from tierctl.sim.info import (
    effective_server_args,
    model_card,
    sglang_model_info,
    vllm_cache_config,
    vllm_non_default_args,
)
from tierctl.sim.lm import WINDOW, SimLM, model_seed
from tierctl.sim.logprobs_io import (
    chat_logprobs,
    completion_logprobs,
    sglang_meta_logprobs,
    vllm_prompt_logprobs,
)
from tierctl.sim.metrics import metrics_for
from tierctl.sim.openai_io import ApiError, GenRequest, parse, parse_generate
from tierctl.sim.surface import surface
from tierctl.sim.tokenizer import (
    DynamicBatchTokenizer,
    block_hashes,
    encode_prompt,
    load_tokenizer,
    max_token_bytes,
    min_tokens,
)

#: The default hard limit on a request body (``--max-body-mib``): a 100 MB upload (the bench
#: client's largest) fits; a bigger one is refused with 413 while it is being read.
MAX_BODY_BYTES = 256 * 1024 * 1024
#: How long a client may take to send its whole request body, in time the server was free to
#: read it (:class:`tierctl.runtime.http_guard.BusyClock`: a loop blocked by a tokenization does
#: not count against the client).
BODY_READ_TIMEOUT_S = 60.0
#: How long a client may take to send a request's line and headers (same clock), before the
#: connection is answered 408 and closed: a slowloris holds no connection longer.
HEADER_READ_TIMEOUT_S = 10.0
# Characters of a prompt's end tokenized to find the context generation continues from (the
# last WINDOW tokens of so short a tail match the whole prompt's encoding).
_TAIL_CHARS = 256
SGLANG_VERSION = surface("sglang").version

#: Environment variable naming the address the server binds instead of the argv's --host.
BIND_HOST_ENV = "TIERCTL_BIND_HOST"


@dataclass(frozen=True)
class ServeOptions:
    """Options of the simulated server that are not engine flags."""

    time_scale: float = 1.0
    queue_full_status: int = 503
    drain_timeout_s: float = 30.0
    health_generate_timeout_s: float = 20.0
    #: How often SGLang's health check looks for engine output (its ``asyncio.sleep(1)``).
    health_poll_s: float = 1.0
    #: ``/health`` runs SGLang's generation check (its default) instead of answering at once.
    health_generation: bool = False
    #: The simulated model's weights seed; ``None`` derives it from ``--model-path``.
    lm_seed: int | None = None
    #: Fraction of positions whose top two tokens swap (a numerics change, for quality tests).
    perturb_fraction: float = 0.0
    perturb_seed: int = 1
    #: Hard limit on one request body, enforced while it is read (413 past it).
    max_body_bytes: int = MAX_BODY_BYTES
    #: Deadlines on reading a body and a request's headers, in free loop time (408 past them).
    body_timeout_s: float = BODY_READ_TIMEOUT_S
    header_timeout_s: float = HEADER_READ_TIMEOUT_S


@dataclass
class _Output:
    """What one request produced: token times (modelled s), texts, ids, and its stream."""

    created: int
    times: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    generated: list[int] = field(default_factory=list)
    cached: int = 0
    resp: web.StreamResponse | None = None


class SimServer:
    """One simulated engine: scheduler driver, tokenizer, metrics and HTTP routes."""

    def __init__(self, config: EngineConfig, cost: CostModel, options: ServeOptions) -> None:
        self.config = config
        self.cost = cost
        self.options = options
        self.is_vllm = config.engine == "vllm"
        self.scheduler = make_scheduler(config, cost)
        self.metrics = metrics_for(
            config.engine,
            config.model_name,
            **({"cache_info": vllm_cache_config(config, self.scheduler)} if self.is_vllm else {}),
        )
        self.driver: EngineDriver | None = None
        self.dyntok: DynamicBatchTokenizer | None = None
        self.draining = False
        self.inflight = 0
        self._idle = asyncio.Event()
        self.started_at = time.time()
        self.bound_port = config.port
        seed = options.lm_seed if options.lm_seed is not None else model_seed(config.model_path)
        self.lm = SimLM(
            seed, perturb_fraction=options.perturb_fraction, perturb_seed=options.perturb_seed
        )
        self.metrics.started(self.started_at)
        #: How long the loop was blocked: deadlines discount it (the client is not to blame).
        self.clock = BusyClock()
        load_tokenizer()  # load before serving so the first request does not pay for it

    def app(self) -> web.Application:
        """The aiohttp application."""
        # Bodies are read by read_body (bounded, chunk by chunk); aiohttp's own limit stays as
        # a backstop for any route that reads a body whole.
        app = web.Application(
            client_max_size=self.options.max_body_bytes, middlewares=[next_request_headers]
        )
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/v1/models/{model_id:.+}", self.model)
        app.router.add_get("/metrics", self.metrics_route)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        if self.is_vllm:
            app.router.add_get("/version", self.version)
            app.router.add_get("/ping", self.health)
            app.router.add_post("/ping", self.health)
            if os.environ.get("VLLM_SERVER_DEV_MODE") == "1":
                # Only in vLLM's development mode, as there.
                app.router.add_get("/server_info", self.server_info)
                app.router.add_post("/reset_prefix_cache", self.flush_cache)
        else:
            app.router.add_get("/health_generate", self.health_generate)
            app.router.add_get("/server_info", self.server_info)
            app.router.add_get("/get_server_info", self.server_info)
            app.router.add_get("/model_info", self.model_info)
            app.router.add_get("/get_model_info", self.model_info)
            app.router.add_post("/flush_cache", self.flush_cache)
            app.router.add_get("/flush_cache", self.flush_cache)
            app.router.add_post("/generate", self.generate)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        self.clock.start()
        sched = self.scheduler
        self.driver = EngineDriver(sched, time_scale=self.options.time_scale, metrics=self.metrics)
        self.driver.start()
        self._idle.set()
        if self.config.enable_dynamic_batch_tokenizer:
            self.dyntok = DynamicBatchTokenizer(
                self.config.dynamic_batch_tokenizer_batch_size,
                self.config.dynamic_batch_tokenizer_batch_timeout,
            )

    async def _on_cleanup(self, app: web.Application) -> None:
        await self.clock.stop()
        if self.driver is not None:
            await self.driver.stop()
        if self.dyntok is not None:
            await self.dyntok.close()

    # -- routes -------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        """200 while serving, 503 while draining; with ``health_generation`` (SGLang's
        default, ``SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION``) SGLang's ``/health`` is its
        ``/health_generate``."""
        if self.options.health_generation and not self.is_vllm:
            return await self.health_generate(request)
        return web.Response(status=503 if self.draining else 200)

    async def flush_cache(self, request: web.Request) -> web.Response:
        """Empty the prefix cache, as SGLang's ``POST /flush_cache`` does: refused (400) while
        requests are running or waiting, so paired A/B blocks can each start cold."""
        sched = self.driver.scheduler if self.driver is not None else None
        if sched is None or sched.busy:
            return web.Response(
                status=400, text="Cache not flushed: there are running or waiting requests.\n"
            )
        if sched.cache is not None:
            sched.cache.clear()
        return web.Response(text="Cache flushed.\n")

    async def health_generate(self, request: web.Request) -> web.Response:
        """SGLang's health check: 503 while draining; else queue a one-token request and look
        once a second (``health_poll_s``) whether the engine produced any output since the
        check began, 200 as soon as it did (so a busy engine answers after one poll whatever
        its queue), 503 after ``health_generate_timeout_s`` (SGLang's
        ``SGLANG_HEALTH_CHECK_TIMEOUT``, 20 s) without any."""
        driver = self.driver
        if self.draining or driver is None:
            return web.Response(status=503)
        rid = "HEALTH_CHECK_" + driver.new_rid()
        seen = driver.deliveries
        outcome, q, _ = driver.submit(rid, 1, 1, ())
        if q is None:
            return web.Response(status=503, text=outcome)
        try:
            produced = await wait_until_async(
                lambda: driver.deliveries > seen,
                self.options.health_generate_timeout_s,
                poll_s=self.options.health_poll_s,
            )
            return web.Response(status=200 if produced else 503)
        finally:
            driver.cancel(rid)

    async def server_info(self, request: web.Request) -> web.Response:
        """Every effective server arg as a top-level key, plus the simulator's own settings."""
        info: dict[str, Any] = effective_server_args(self.config, self.scheduler)
        info["port"] = self.bound_port  # the port actually bound (differs with --port 0)
        info["version"] = surface(self.config.engine).version
        info["tierctl_sim"] = {
            "time_scale": self.options.time_scale,
            "cost_model": self.cost.name,
            "queue_full_status": self.options.queue_full_status,
            "lm_seed": self.lm.seed,
            "perturb_fraction": self.options.perturb_fraction,
            "argv": list(self.config.argv),
        }
        return web.json_response(info, dumps=_dumps)

    async def models(self, request: web.Request) -> web.Response:
        """The one served model."""
        card = model_card(self.config, int(self.started_at), self.scheduler)
        return web.json_response({"object": "list", "data": [card]})

    async def model(self, request: web.Request) -> web.Response:
        """``/v1/models/{id}``: the served model's card, 404 for any other name."""
        if request.match_info["model_id"] != self.config.model_name:
            err = ApiError(
                f"The model `{request.match_info['model_id']}` does not exist.", status=404
            )
            return web.json_response(err.body(), status=404)
        return web.json_response(model_card(self.config, int(self.started_at), self.scheduler))

    async def model_info(self, request: web.Request) -> web.Response:
        """SGLang's ``/model_info``."""
        return web.json_response(sglang_model_info(self.config))

    async def version(self, request: web.Request) -> web.Response:
        """vLLM's ``/version``."""
        return web.json_response({"version": surface("vllm").version})

    async def metrics_route(self, request: web.Request) -> web.Response:
        """Prometheus text format; SGLang serves it only with ``--enable-metrics``, vLLM
        always."""
        if not (self.is_vllm or self.config.enable_metrics):
            raise web.HTTPNotFound()
        return web.Response(body=self.metrics.render(), content_type="text/plain", charset="utf-8")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``."""
        return await self._generate(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/completions``."""
        return await self._generate(request, chat=False)

    async def generate(self, request: web.Request) -> web.StreamResponse:
        """SGLang's native ``POST /generate`` (non-streaming), with ``return_logprob``."""
        return await self._generate(request, chat=False, native=True)

    # -- generation ---------------------------------------------------------------------

    async def _generate(
        self, request: web.Request, *, chat: bool, native: bool = False
    ) -> web.StreamResponse:
        arrived = time.monotonic()
        self.inflight += 1
        self._idle.clear()
        try:
            if self.draining:
                raise ApiError("the server is shutting down", status=503)
            try:
                # A client that sends its body slower than this is dropped (a slowloris would
                # otherwise hold a request slot forever); only time the loop was free to read
                # counts (a tokenization that blocked it is the server's, not the client's).
                raw = await read_body(
                    request, self.options.max_body_bytes, self.clock, self.options.body_timeout_s
                )
            except BodyTooLarge as exc:
                return _too_large(exc.limit, exc.seen)
            except TimeoutError:
                raise ApiError(
                    f"the request body did not arrive within {self.options.body_timeout_s:g} s "
                    "(of time the server was free to read it)",
                    status=408,
                ) from None
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                raise ApiError(f"the request body is not valid JSON: {exc}") from None
            except RecursionError:
                raise ApiError("the request body nests too deeply") from None
            gen = parse_generate(body) if native else parse(body, chat=chat)
            # Cheap before expensive: a prompt that cannot fit is refused from a bound on its
            # token count, not after tokenizing it (160 s for 100 MB, /health down meanwhile).
            self._refuse_unfittable(gen)
            try:
                n_tokens, hashes = await self._tokenize(gen)
                ids = self._prompt_ids(gen)
            except Exception as exc:
                # e.g. a lone surrogate the tokenizer refuses: the client's input, not a crash
                raise ApiError(f"cannot tokenize the prompt: {exc}", param="prompt") from None
            return await self._run(request, gen, n_tokens, hashes, arrived, ids, native)
        except ApiError as err:
            return web.json_response(err.body(), status=err.status)
        finally:
            self.inflight -= 1
            if self.inflight == 0:
                self._idle.set()

    def _token_limit(self) -> int:
        """The most prompt plus output tokens a request may have (the KV pool, and vLLM's
        model length)."""
        sched = self.scheduler
        limit = sched.kv_pool_tokens
        model_len = getattr(sched, "max_model_len", None)
        return min(limit, model_len) if isinstance(model_len, int) else limit

    def _refuse_unfittable(self, gen: GenRequest) -> None:
        """Refuse a text prompt whose token count provably exceeds the limit, without
        tokenizing it: characters first (a text has at least as many bytes), then bytes,
        each divided by the most bytes one token covers (:func:`max_token_bytes`)."""
        per = max_token_bytes()
        if gen.text is None or per is None:
            return
        room = self._token_limit() - gen.max_tokens
        if -(-len(gen.text) // per) <= room and min_tokens(gen.text) <= room:
            return
        self.metrics.aborted()
        raise self._too_long(min_tokens(gen.text), gen.max_tokens, at_least=True)

    def _too_long(self, n_tokens: int, max_tokens: int, *, at_least: bool = False) -> ApiError:
        """The engine's answer to a prompt plus max_tokens over the limit (400)."""
        some = "at least " if at_least else ""
        count = f"{some}{n_tokens}"
        sched = self.scheduler
        if self.is_vllm:
            limit = getattr(sched, "max_model_len", sched.kv_pool_tokens)
            return ApiError(
                f"This model's maximum context length is {limit} tokens. However, you "
                f"requested {some}{n_tokens + max_tokens} tokens ({count} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length of the "
                "messages or completion.",
                param="max_tokens",
                kind="BadRequestError",
            )
        return ApiError(
            f"the prompt ({count} tokens) plus max_tokens ({max_tokens}) exceeds "
            f"the KV pool ({sched.kv_pool_tokens} tokens)",
            param="max_tokens",
        )

    async def _tokenize(self, gen: GenRequest) -> tuple[int, tuple[int, ...]]:
        if gen.token_ids is not None:
            return len(gen.token_ids), block_hashes(gen.token_ids)
        assert gen.text is not None
        if self.dyntok is not None:
            return await self.dyntok.encode(gen.text)
        # On the event loop, as SGLang's tokenizer manager does without the flag.
        return encode_prompt(gen.text)

    def _prompt_ids(self, gen: GenRequest) -> list[int]:
        """The prompt's token ids: all of them when logprobs are asked, else enough of the end
        for the model's context (generation continues from there)."""
        if gen.token_ids is not None:
            return list(gen.token_ids)
        assert gen.text is not None
        full = gen.prompt_logprobs is not None or gen.output_logprobs is not None
        text = gen.text if full else gen.text[-_TAIL_CHARS:]
        ids: list[int] = load_tokenizer().encode(text, add_special_tokens=False).ids
        return ids

    async def _run(
        self,
        request: web.Request,
        gen: GenRequest,
        n_tokens: int,
        hashes: tuple[int, ...],
        arrived: float,
        prompt_ids: list[int],
        native: bool = False,
    ) -> web.StreamResponse:
        """Admit, stream, record, respond: one request's life after tokenization."""
        submitted = time.monotonic()
        rid, q, enqueued_s = self._admit(gen, n_tokens, hashes)
        out = await self._stream(request, gen, rid, q, prompt_ids, n_tokens if native else None)
        usage = {
            "prompt_tokens": n_tokens,
            "completion_tokens": len(out.texts),
            "total_tokens": n_tokens + len(out.texts),
            "prompt_tokens_details": {"cached_tokens": out.cached},
        }
        # Wall time before the scheduler saw it (body read, tokenization) plus modelled
        # engine time, so a time-scaled server reports what the modelled GPU would.
        host_s = submitted - arrived
        times = out.times
        self.metrics.finished(
            streaming=gen.stream,
            prompt_tokens=n_tokens,
            cached_tokens=out.cached,
            generation_tokens=len(out.texts),
            ttft_s=host_s + (times[0] - enqueued_s) if times else None,
            e2e_s=host_s + (times[-1] - enqueued_s) if times else 0.0,
            itl_s=[b - a for a, b in itertools.pairwise(times)],
        )
        return await self._respond(gen, rid, out, usage, prompt_ids, native)

    def _admit(
        self, gen: GenRequest, n_tokens: int, hashes: tuple[int, ...]
    ) -> tuple[str, asyncio.Queue[Any], float]:
        """Hand the request to the scheduler; an ApiError when it refuses it."""
        driver = self.driver
        assert driver is not None
        rid = driver.new_rid()
        outcome, q, enqueued_s = driver.submit(rid, max(n_tokens, 1), gen.max_tokens, hashes)
        if q is not None:
            return rid, q, enqueued_s
        self.metrics.aborted()
        if outcome == "queue_full":
            raise ApiError(
                "The request queue is full.",
                status=self.options.queue_full_status,
                kind="server_error",
            )
        raise self._too_long(n_tokens, gen.max_tokens)

    async def _stream(
        self,
        request: web.Request,
        gen: GenRequest,
        rid: str,
        q: asyncio.Queue[Any],
        prompt_ids: list[int],
        native_prompt_tokens: int | None = None,
    ) -> _Output:
        """Wait for each token the scheduler produces; write it as an SSE chunk if streaming
        (SGLang's native ``/generate`` events when ``native_prompt_tokens`` is given)."""
        driver = self.driver
        assert driver is not None
        out = _Output(created=int(time.time()))
        model = self.config.model_name
        obj = "chat.completion" if gen.chat else "text_completion"
        finished = False
        try:
            # Both engines send the chat role chunk (empty content) with the first token;
            # SGLang's chat route also holds the 200 and the headers until then (it awaits the
            # first chunk before answering), the other streams send their headers at once.
            if gen.stream and (self.is_vllm or not gen.chat):
                await self._start_stream(request, out)
            context = prompt_ids[-WINDOW:]
            while not finished:
                em, produced_s = await q.get()
                if gen.stream and em.index == 1:
                    if out.resp is None:
                        await self._start_stream(request, out)
                    assert out.resp is not None
                    if gen.chat:
                        role = {"role": "assistant", "content": ""}
                        await _sse(out.resp, _chunk(rid, obj, out.created, model, role, None))
                out.times.append(produced_s)
                if em.index == 1:
                    out.cached = driver.cached_tokens(rid)
                finished = em.finished
                token = self.lm.predict(context).top
                context = [*context, token][-WINDOW:]
                out.generated.append(token)
                piece = self.lm.text(token)
                out.texts.append(piece)
                if out.resp is not None and native_prompt_tokens is not None:
                    await _sse(out.resp, _native_event(rid, out, native_prompt_tokens, finished))
                elif out.resp is not None:
                    delta = {"content": piece} if gen.chat else piece
                    chunk = _chunk(
                        rid, obj, out.created, model, delta, "length" if finished else None
                    )
                    await _sse(out.resp, chunk)
        except (ConnectionResetError, asyncio.CancelledError):
            driver.cancel(rid)
            self.metrics.aborted()
            raise
        return out

    async def _start_stream(self, request: web.Request, out: _Output) -> None:
        """Send the SSE response headers."""
        out.resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await out.resp.prepare(request)

    async def _respond(
        self,
        gen: GenRequest,
        rid: str,
        out: _Output,
        usage: dict[str, Any],
        prompt_ids: list[int],
        native: bool,
    ) -> web.StreamResponse:
        """The end of the stream, or the whole non-streaming body."""
        model = self.config.model_name
        obj = "chat.completion" if gen.chat else "text_completion"
        if out.resp is not None:
            if gen.include_usage:
                await _sse(
                    out.resp,
                    {
                        "id": rid,
                        "object": obj + ".chunk" if gen.chat else obj,
                        "created": out.created,
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    },
                )
            await out.resp.write(b"data: [DONE]\n\n")
            await out.resp.write_eof()
            return out.resp
        text = "".join(out.texts)
        if native:
            meta = self._meta_info(rid, gen, prompt_ids, out.generated, usage)
            return web.json_response({"text": text, "meta_info": meta})
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length", "logprobs": None}
        if gen.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = (gen.text or "") + text if gen.echo else text
        self._add_logprobs(choice, gen, prompt_ids, out.generated)
        return web.json_response(
            {
                "id": rid,
                "object": obj,
                "created": out.created,
                "model": model,
                "choices": [choice],
                "usage": usage,
            }
        )

    def _add_logprobs(
        self, choice: dict[str, Any], gen: GenRequest, prompt: list[int], generated: list[int]
    ) -> None:
        if gen.output_logprobs is not None:
            choice["logprobs"] = (
                chat_logprobs(self.lm, prompt, generated, gen.output_logprobs)
                if gen.chat
                else completion_logprobs(
                    self.lm, prompt, generated, gen.output_logprobs, echo=gen.echo
                )
            )
        if gen.prompt_logprobs is not None:
            choice["prompt_logprobs"] = vllm_prompt_logprobs(self.lm, prompt, gen.prompt_logprobs)

    def _meta_info(
        self,
        rid: str,
        gen: GenRequest,
        prompt: list[int],
        generated: list[int],
        usage: dict[str, Any],
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": rid,
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "cached_tokens": usage["prompt_tokens_details"]["cached_tokens"],
            "finish_reason": {"type": "length", "length": len(generated)},
        }
        if gen.output_logprobs is not None:
            meta.update(
                sglang_meta_logprobs(
                    self.lm,
                    prompt,
                    generated,
                    gen.output_logprobs,
                    start=gen.logprob_start,
                    with_input=gen.prompt_logprobs is not None,
                )
            )
        return meta

    # -- lifecycle ----------------------------------------------------------------------

    async def drain(self, now: asyncio.Event | None = None) -> None:
        """Refuse new work, answer /health 503, and wait for in-flight requests: until none
        is left, the drain time-out, or ``now`` is set (a second Ctrl-C)."""
        self.draining = True
        waits = [asyncio.ensure_future(self._idle.wait())]
        if now is not None:
            waits.append(asyncio.ensure_future(now.wait()))
        try:
            await asyncio.wait(
                waits, timeout=self.options.drain_timeout_s, return_when="FIRST_COMPLETED"
            )
        finally:
            for w in waits:
                w.cancel()


def _native_event(rid: str, out: _Output, prompt_tokens: int, finished: bool) -> dict[str, Any]:
    """One event of SGLang's streamed ``/generate``: the text so far and the counts."""
    n = len(out.texts)
    return {
        "text": "".join(out.texts),
        "meta_info": {
            "id": rid,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n,
            "cached_tokens": out.cached,
            "finish_reason": {"type": "length", "length": n} if finished else None,
        },
        "index": 0,
    }


def _chunk(
    rid: str, obj: str, created: int, model: str, delta: Any, finish: str | None
) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
    if obj == "chat.completion":
        choice["delta"] = delta
    else:
        choice["text"] = delta
    return {
        "id": rid,
        "object": obj + ".chunk" if obj == "chat.completion" else obj,
        "created": created,
        "model": model,
        "choices": [choice],
    }


async def _sse(resp: web.StreamResponse, obj: dict[str, Any]) -> None:
    await resp.write(b"data: " + _dumps(obj).encode() + b"\n\n")


def _mib(n: int) -> str:
    return f"{n / 1024 / 1024:g} MiB"


def _too_large(limit: int, seen: int) -> web.Response:
    """413 in the OpenAI error shape; the connection closes, so the rest of an oversized
    upload is never read (aiohttp would otherwise drain it to keep the connection alive)."""
    err = ApiError(
        f"the request body is larger than the server's limit of {_mib(limit)} "
        f"({limit} bytes; refused at {seen} bytes): send a smaller body, or raise the limit "
        "with `tierctl sim serve --max-body-mib N`",
        status=413,
        kind="invalid_request_error",
    )
    resp = web.json_response(err.body(), status=413)
    resp.force_close()
    return resp


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), default=str)


async def serve(
    config: EngineConfig,
    cost: CostModel,
    options: ServeOptions,
    *,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    announce: Any = print,
) -> None:
    """Serve until SIGTERM/SIGINT (or ``stop``), then drain and exit.

    Prints ``listening on http://HOST:PORT`` once ready (port 0 picks a free port).

    Raises:
        RuntimeFailure: the address cannot be bound.
    """
    server = SimServer(config, cost, options)
    # The drain below is the only wait for in-flight requests (its time-out, or a second
    # Ctrl-C): what is still in flight after it is cut at once, not waited on for aiohttp's
    # default minute more.
    runner = web.AppRunner(
        server.app(),
        access_log=None,
        handle_signals=False,
        shutdown_timeout=1.0,
        **ClientBounds().runner_options(),
    )
    await runner.setup()
    # Where it really listens: $TIERCTL_BIND_HOST when set (the local driver sets 127.0.0.1,
    # as a container's private network would), else the argv's --host, which is also what
    # /server_info reports either way.
    bind = os.environ.get(BIND_HOST_ENV) or config.host
    site = GuardedSite(
        runner,
        bind,
        config.port,
        clock=server.clock,
        bounds=ClientBounds(header_timeout_s=options.header_timeout_s),
        backlog=1024,
    )
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise RuntimeFailure(
            f"cannot listen on {bind}:{config.port}: {exc.strerror}",
            fix="pick a free --port (0 picks one)",
        ) from None
    addresses = runner.addresses
    port = int(addresses[0][1]) if addresses else config.port
    server.bound_port = port
    host = f"[{bind}]" if ":" in bind else bind
    if config.engine == "vllm":
        # What vLLM logs at start-up; rollout gates read the running argv back from it.
        from tierctl.engines.vllm import format_non_default_args

        announce(format_non_default_args(vllm_non_default_args(config)))
    stop_ev = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    # Before announcing: a Ctrl-C right after "listening on" must drain, not kill the loop.
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop_ev.set)
    announce(f"listening on http://{host}:{port}")
    if ready is not None:
        ready.set()
    try:
        await stop_ev.wait()
        # A second SIGINT/SIGTERM stops at once instead of waiting out the drain.
        now = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, now.set)
        deadline = options.drain_timeout_s
        announce(
            f"draining: {server.inflight} request(s) in flight, new ones refused (503); "
            f"waiting up to {deadline:g} s for them (Ctrl-C again to stop now)"
        )
        await server.drain(now)
        left = server.inflight
        announce(
            "drained: no request in flight"
            if left == 0
            else f"stopped with {left} request(s) in flight"
            + (" (stopped now, as asked)" if now.is_set() else f" (drain time-out {deadline:g} s)")
        )
    finally:
        await runner.cleanup()
