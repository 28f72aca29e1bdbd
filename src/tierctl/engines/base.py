"""What tierctl knows about one inference engine, in one object: an :class:`EngineProfile`.

A profile is the only place that names an engine's launcher, positional arguments, flag
syntax, HTTP endpoints, metric names and label conventions, the PromQL built on them, the
log lines that mean the engine died, how its running argv is verified, and which of its
scheduler flags the simulator models. Every other module asks the profile (see
:func:`tierctl.engines.profile_for`), so a new engine is one new module plus its flag catalog.

The base class implements what engines share (argv rendering and reading, metric lookups,
PromQL) from a few declared attributes; an engine overrides what differs.
"""

from __future__ import annotations

import json
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tierctl.compose.argv import first_flag, parse_flags
from tierctl.engine_catalog import Catalog, Flag

# An image tag naming a release: v0.5.3, 0.10.1.1, v0.4.9.post2-cu126, v0.11.0rc1.
_RELEASE_TAG = re.compile(r"^v?(\d+\.\d+(?:\.\d+)*(?:\.?post\d+|rc\d+)?)(?:$|[-_+])")

# An image written as a variable with a default (`${IMG:-vllm/vllm-openai:v0.11.0}`): the default
# is the image whenever the variable is unset, so it is the one recognised.
_DEFAULTED = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*:?-(?P<image>[^}]*)\}$")


def image_reference(image: str | None) -> str | None:
    """The image a reference names, seeing through ``${VAR:-default}``."""
    if not image:
        return image
    match = _DEFAULTED.match(image.strip())
    return match["image"] if match else image


#: ``get(path) -> (status, body text)``; status 0 when the request failed. Keeps profiles free
#: of any HTTP client: the gates pass one in.
Fetch = Callable[[str], tuple[int, str]]


@dataclass(frozen=True)
class SimRules:
    """The rules of one engine release that the simulator applies, and where they were read.

    Each engine profile says, per release (:meth:`EngineProfile.sim_rules`), what its
    scheduler and its start-up checks do, so the simulator's policies hold no release
    knowledge of their own. ``read_from`` names the release whose source was read; a release
    that was not read takes the nearest read one's rules, and ``assumed`` says so.

    Attributes:
        engine: the engine kind.
        release: the release asked for.
        read_from: the release (and files) the rules were read from.
        assumed: True when ``release`` itself was not read.
        threshold_needs_company: vLLM: ``--long-prefill-token-threshold`` caps a chunk only
            when more than one request is eligible (running + waiting) at the step's start.
        threshold_adaptive: vLLM: ``--long-prefill-token-threshold-adaptive`` exists.
        unchunked_budget_holds_model_len: vLLM: start-up refuses chunked prefill off with
            ``--max-num-batched-tokens`` below ``--max-model-len``.
        budget_holds_max_seqs: vLLM: start-up refuses a token budget below ``--max-num-seqs``.
        threshold_within_model_len: vLLM: start-up refuses a threshold above the model length.
        interval_global_under_dp: SGLang: with DP attention the prefill-decode interval is
            armed on every rank when any rank runs an extend batch (the global forward mode).
        step_cost_flags: flags that change a step's cost (numerics, kernels, graphs, parallel
            layout, speculative decoding) that a cost model fitted at one setting holds fixed.
        retract_decode: SGLang: admission counts the running requests' outputs at
            ``new_token_ratio`` of what they have left, and a decode round that cannot get its
            KV slots retracts requests (``retract_decode``) back to the queue (recomputed).
        new_token_ratio: SGLang: (initial ratio, min factor, decay rounds): the ratio starts
            at the initial one times ``--schedule-conservativeness`` and decays linearly to
            initial x factor over that many decode rounds without a retraction.
        retract_decode_steps: SGLang: after a retraction the ratio is reset to (decoded +
            this x requests kept) / (their max new tokens + 1).
        clip_max_new_tokens: SGLang: a request's outputs counted at admission are clipped to
            this many.
        disaggregation: how the release expresses prefill/decode disaggregation (None: not
            modelled): the flag and its values, or the JSON flag and its role key.
        metrics_preemption: the family (no prefix) counting preemptions/retractions.
        overlap_frees_late: SGLang: under the overlap scheduler (on unless
            ``--disable-overlap-schedule``) a round's results are processed after the next
            round is scheduled, so the slot and KV a request gives back when it finishes in
            round t are admitted from round t+2 (round t+1 decodes the others).
        decode_reserved_tokens: SGLang: a decode server preallocates a transferred prompt's
            KV only when the pool keeps this many tokens free for each request it already
            holds (running, transferring, waiting) and for the new one.
        kv_block_tokens: vLLM: the KV block (tokens) the release uses when ``--block-size``
            is not given, per device (``cuda``, ``cpu``): the pool of
            ``--num-gpu-blocks-override`` blocks is that many tokens each, and KV is taken
            a block at a time.
        admission_reserves_prompt: vLLM: a waiting (or preempted) request is admitted only
            when blocks for its whole sequence so far (prompt, and outputs of a preempted
            one) are free, not just for its first chunk (``--scheduler-reserve-full-isl``,
            on by default).
    """

    engine: str
    release: str
    read_from: str
    assumed: bool = False
    threshold_needs_company: bool = False
    threshold_adaptive: bool = False
    unchunked_budget_holds_model_len: bool = False
    budget_holds_max_seqs: bool = False
    threshold_within_model_len: bool = False
    interval_global_under_dp: bool = False
    step_cost_flags: frozenset[str] = frozenset()
    retract_decode: bool = False
    new_token_ratio: tuple[float, float, int] = (0.7, 0.14, 600)
    retract_decode_steps: int = 20
    clip_max_new_tokens: int = 4096
    disaggregation: DisaggregationRule | None = None
    metrics_preemption: str = ""
    decode_reserved_tokens: int = 0
    overlap_frees_late: bool = False
    kv_block_tokens: tuple[tuple[str, int], ...] = ()
    admission_reserves_prompt: bool = False

    def block_tokens(self, device: str) -> int | None:
        """The default KV block on ``device`` (None: the device is unknown or not listed)."""
        return dict(self.kv_block_tokens).get(device)


@dataclass(frozen=True)
class DisaggregationRule:
    """How one engine release is told it is one side of a prefill/decode disaggregated pair.

    SGLang: ``--disaggregation-mode prefill|decode`` (``null`` = colocated) with
    ``--disaggregation-transfer-backend``; vLLM: ``--kv-transfer-config`` JSON whose
    ``kv_role`` is ``kv_producer`` (prefill), ``kv_consumer`` (decode) or ``kv_both``.

    Attributes:
        flag: the flag (no dashes) that says which side a replica is.
        json_key: when the flag's value is JSON, the key holding the role ("" otherwise).
        prefill: the values meaning "prefill side".
        decode: the values meaning "decode side".
        colocated: values meaning "not disaggregated".
        either: values meaning "both sides" (vLLM's ``kv_both``: the role is the router's).
        backend_flag: the flag naming the transfer backend ("" when in the JSON).
        backend_key: the JSON key naming the transfer backend ("" when a flag).
        backends: the transfer backends the release knows.
        default_transfer_slots: concurrent KV transfers per prefill replica (the engine's
            default transfer queue or thread pool), stated.
        read_from: where these were read.
    """

    flag: str
    json_key: str = ""
    prefill: tuple[str, ...] = ()
    decode: tuple[str, ...] = ()
    colocated: tuple[str, ...] = ()
    either: tuple[str, ...] = ()
    backend_flag: str = ""
    backend_key: str = ""
    backends: tuple[str, ...] = ()
    default_transfer_slots: int = 4
    read_from: str = ""


@dataclass(frozen=True)
class MetricRef:
    """One series family an engine exports, by its name without the engine prefix.

    Attributes:
        name: e.g. ``e2e_request_latency_seconds_count`` (the prefix is added per pipeline).
        matchers: Extra PromQL label matchers that select the family's samples, e.g.
            ``finished_reason="abort"`` (vLLM counts aborts in one labelled counter).
    """

    name: str
    matchers: str = ""


@dataclass(frozen=True)
class EngineMetrics:
    """The engine's names for what tierctl measures (all without prefix).

    The histogram entries are base names: ``_bucket``, ``_sum`` and ``_count`` are appended.
    """

    running: str  # gauge: requests running (decoding or prefilling) now
    waiting: str  # gauge: requests queued
    ttft: str  # histogram: time to first token
    itl: str  # histogram: inter-token latency (what the field reports call TPOT)
    e2e: str  # histogram: end-to-end request latency
    prompt_tokens: str  # counter
    generation_tokens: str  # counter
    finished: MetricRef  # counter of requests that finished (not aborted)
    aborted: MetricRef  # counter of aborted requests
    extra: Mapping[str, str] = field(default_factory=dict)  # engine-specific families by role


@dataclass(frozen=True)
class LogPattern:
    """A log line that means trouble, for arm health and rollout diagnostics.

    Attributes:
        name: Stable short name (``cuda-oom``, ``engine-dead``, ``watchdog``, ``traceback``).
        regex: Searched in each line.
        fatal: Whether the engine cannot serve after it (a traceback alone may be recovered).
    """

    name: str
    regex: str
    fatal: bool = True

    def search(self, line: str) -> bool:
        """Whether the line matches."""
        return re.search(self.regex, line) is not None


@dataclass(frozen=True)
class TokenScore:
    """One teacher-forced position: the given token's logprob and the engine's greedy choice.

    Attributes:
        token: The token id at this position (the text's own token).
        logprob: log P(token | everything before it).
        top: The engine's most likely token id at this position (its greedy choice).
        top_logprob: log P(top | everything before it).
    """

    token: int
    logprob: float
    top: int
    top_logprob: float


class LogprobShapeError(ValueError):
    """An engine answered a logprob request in a shape its profile does not describe."""


@dataclass(frozen=True)
class ArgvCheck:
    """What verifying a running engine's arguments found.

    Attributes:
        method: How the engine was asked (``/server_info``, ``startup log``, ``HTTP surface``).
        verified: Rendered flags the engine confirmed.
        mismatches: One line per flag the engine reports differently or not at all.
        unverifiable: Rendered flags this method cannot see (reported, not failed).
        error: Set when the engine could not be asked at all.
    """

    method: str
    verified: tuple[str, ...] = ()
    mismatches: tuple[str, ...] = ()
    unverifiable: tuple[str, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        """No mismatch and no error."""
        return not self.mismatches and self.error is None


@dataclass(frozen=True)
class LaunchCommand:
    """An engine command split the way the engine reads it.

    Attributes:
        launcher: The tokens that start the engine (``vllm serve``).
        positional: Positional arguments by spec name (``{"model": "/models/x"}``).
        flags_start: Index in the argv of the first flag token.
    """

    launcher: tuple[str, ...]
    positional: dict[str, str]
    flags_start: int


class EngineProfile(ABC):
    """One engine: override the class attributes, and :meth:`verify_running_args`."""

    #: The spec's ``engine.kind`` and the catalog's engine name.
    kind: str
    #: Human name.
    title: str
    #: Package-registry distributions that carry this engine's server (same package inside,
    #: same flags): the first is the canonical one; ``catalog build DIST==VERSION`` takes any.
    distributions: tuple[str, ...] = ()
    #: The engine's parser reads ``--max_model_len`` as ``--max-model-len`` (and
    #: ``--x.key`` as one key of a JSON flag): vLLM's FlexibleArgumentParser.
    flag_underscores: bool = False
    #: Launchers this engine is started with; the first is the default one rendered.
    launchers: tuple[tuple[str, ...], ...]
    #: Spec arg names rendered positionally, in order, by the launchers in
    #: :attr:`positional_launchers` (vLLM's ``vllm serve MODEL``).
    positional: tuple[str, ...] = ()
    #: Launchers that take :attr:`positional`; other launchers get them as ``--name value``.
    positional_launchers: tuple[tuple[str, ...], ...] = ()
    #: Launchers of another framework's worker that runs this engine's own parser beside
    #: flags of its own (NVIDIA Dynamo's ``python3 -m dynamo.vllm``): the engine's catalog
    #: judges every flag but :attr:`wrapper_flags`, and the image tag names the wrapper's
    #: release, not the engine's. Never rendered: a spec starts the engine's own server.
    wrapper_launchers: tuple[tuple[str, ...], ...] = ()
    #: The wrapper's own flags (with dashes, every spelling), never judged as the engine's.
    wrapper_flags: frozenset[str] = frozenset()
    #: The wrapper's name in messages.
    wrapper_title: str = ""
    #: Substrings of a command token that mean "this runs the engine" (module names).
    command_markers: tuple[str, ...] = ()
    #: Image repository names (no registry, no tag) that run this engine.
    images: tuple[str, ...] = ()
    #: What those images run when a service gives only flags (their ENTRYPOINT); () when the
    #: image needs the whole command.
    image_launcher: tuple[str, ...] = ()
    #: Builds whose tag is the publisher's dated release, not the engine's (NGC's
    #: ``nvcr.io/nvidia/vllm:26.02-py3`` is NVIDIA's February 2026 container): no release.
    dated_images: tuple[str, ...] = ()
    # The images whose own ENTRYPOINT runs ``image_launcher``: other builds of the engine
    # (NGC's nvcr.io/nvidia/vllm, rocm/vllm) start a shell or a wrapper script instead.
    launcher_images: tuple[str, ...] = ()
    #: Flags (spec names, every spelling) of the parallel axes whose product is the GPUs one
    #: replica needs: (axis, spellings), axis in tp/pp/dp.
    parallel_flags: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: Bare flags under which the dp axis runs inside the TP group (no extra GPUs).
    dp_inside_tp_flags: tuple[str, ...] = ()
    #: Flags giving the number of nodes one replica spans (its GPUs are split across them).
    nodes_flags: tuple[str, ...] = ()
    #: The flag giving this node's rank in a multi-node replica (None: no multi-node launch).
    node_rank_flag: str | None = None
    #: The flag naming the rank-0 node's address in a multi-node replica, and whether its
    #: value is ``host:port`` (SGLang's ``--dist-init-addr``) or the host alone.
    leader_address_flag: str | None = None
    leader_address_has_port: bool = False
    #: The flag naming the address the HTTP server binds (a pod must bind its own IP, not
    #: loopback, for a Service or a kubelet probe to reach it).
    listen_host_flag: str = "host"
    default_port: int = 8000
    #: The flag giving the share of a GPU's memory the engine takes (a fraction of 1): two
    #: replicas that each set it may share a GPU while their shares fit in it.
    memory_fraction_flag: str | None = None
    #: 200 once the server is up (what proxies probe).
    health_path: str = "/health"
    #: 200 once the server can generate (may run a tiny generation).
    readiness_path: str = "/health"
    metrics_path: str = "/metrics"
    models_path: str = "/v1/models"
    #: Paths only this engine serves (a 200 there means this engine, when its ``/metrics``
    #: did not tell): :mod:`tierctl.engines.detection`'s second rule.
    identity_paths: tuple[str, ...] = ()
    #: ``POST`` here empties the engine's prefix cache (None: the engine has no such endpoint).
    flush_cache_path: str | None = None
    #: What that endpoint needs beyond the path (said when it is refused).
    flush_cache_needs: str = ""
    #: ``stream_options`` entries that make a streamed completion carry its running usage on
    #: every chunk (so a client counts tokens even when the engine merges several into one
    #: chunk); ``None``: the engine reports usage only at the end of a stream.
    per_chunk_usage: ClassVar[Mapping[str, bool] | None] = None
    #: The prefix as the engine exports it first, then spellings pipelines rewrite it to.
    metric_prefixes: tuple[str, ...] = ()
    metrics: EngineMetrics
    #: Earlier names of a family, by role (``itl``: vLLM's ``time_per_output_token_seconds``),
    #: so the readout can say a family was renamed rather than missing.
    metric_aliases: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    #: Label carrying the served model name on every engine series.
    model_label: str = "model_name"
    #: Labels that split one replica's series by rank or engine core (summed over).
    rank_labels: tuple[str, ...] = ()
    fatal_log_patterns: tuple[LogPattern, ...] = ()
    #: What to do when the engine's /metrics has none of its series.
    metrics_fix: str = "enable the engine's metrics"
    #: The rollout gate that verifies the running argv, as the planner lists it.
    argv_gate: str = "server-info"
    #: How that gate asks, for runbooks and docs.
    argv_gate_text: str = ""
    #: Scheduler flags (spec names, no dashes) the simulator models for this engine. The
    #: simulator fills its policy from these; ``sim compare`` warns about any other flag that
    #: differs between arms.
    sim_modelled_flags: frozenset[str] = frozenset()
    #: The scheduler's two limits as flags (spec names, no dashes): the per-step token budget
    #: and the most requests running at once ("" where the engine has none). ``sim fit``
    #: runs its fit engine at the larger arm's.
    token_budget_flag: str = ""
    max_running_flag: str = ""
    #: How ``false`` renders when no catalog says otherwise: ``"omit"`` or ``"no-prefix"``.
    false_default: str = "omit"
    #: The label of the per-draft-position acceptance counter (``metrics.extra``'s
    #: ``spec_accepted_per_position``); "" when the engine exports none.
    spec_position_label: str = ""

    def sim_rules(self, version: str) -> SimRules:
        """The scheduler and start-up rules of release ``version`` the simulator applies
        (an engine without any keeps none)."""
        return SimRules(engine=self.kind, release=version, read_from="", assumed=True)

    # --- images ------------------------------------------------------------------------

    def matches_image(self, image: str | None) -> bool:
        """Whether an image reference (``registry/repo:tag@digest``) runs this engine."""
        image = image_reference(image)
        if not image:
            return False
        return _names_one_of(image, self.images)

    def image_entrypoint(self, image: str | None) -> tuple[str, ...]:
        """What the image's own ENTRYPOINT runs before a compose ``command`` (the official
        ``vllm/vllm-openai`` image: ``vllm serve``), or () where the command is the whole argv
        (``lmsysorg/sglang`` has no launcher entrypoint; an image of another engine)."""
        image = image_reference(image)
        if not image or not _names_one_of(image, self.launcher_images):
            return ()
        return self.image_launcher

    def doubled_launcher(self, image: str | None, command: Iterable[str]) -> tuple[str, ...]:
        """The launcher a ``command`` starts with although the image's entrypoint already runs
        one (``command: [vllm, serve, ...]`` on ``vllm/vllm-openai`` runs
        ``vllm serve vllm serve ...``); () when it does not."""
        entry = self.image_entrypoint(image)
        tokens = list(command)
        found = self._find_launcher(tokens) if entry else None
        if found is None or found[0] != len(found[1]):
            return ()
        return tuple(tokens[: found[0]])

    def image_version(self, image: str | None) -> str | None:
        """The engine release an image tag names (``v0.5.3-cu124`` -> ``0.5.3``), or None."""
        image = image_reference(image)
        if not image or _names_one_of(image, self.dated_images):
            return None
        tag = image.split("@", 1)[0].rsplit("/", 1)[-1].partition(":")[2]
        match = _RELEASE_TAG.match(tag)
        return match.group(1) if match else None

    def gpus_needed(self, flags: Mapping[str, Any]) -> int | None:
        """GPUs one replica with these flags occupies on its node (TP x PP x DP), or None
        when a factor is not a count (a ``${VAR}``, ``inf``, a 400-digit number)."""
        total = 1
        inside = any(flags.get(n) not in (None, False) for n in self.dp_inside_tp_flags)
        for axis, names in self.parallel_flags:
            if axis == "dp" and inside:
                continue
            factor = _count(next((flags[n] for n in names if n in flags), 1))
            if factor is None:
                return None
            total *= factor
        nodes = _count(next((flags[n] for n in self.nodes_flags if n in flags), 1))
        if nodes is None:
            return None
        # Integer ceiling division: a float division of a huge product overflowed.
        return max(1, -(-total // max(1, nodes)))

    # --- argv: rendering ---------------------------------------------------------------

    def default_launcher(self) -> tuple[str, ...]:
        """The launcher rendered when the spec gives none."""
        return self.launchers[0]

    def launcher_tokens(self) -> frozenset[str]:
        """Every token that may stand before the first flag as (part of) a launcher, in any
        order: its launchers' tokens, its command markers, and its kind (a wrapper script
        named after the engine). The simulator skips these when it reads an argv."""
        tokens = {t for launcher in self.launchers for t in launcher}
        return frozenset(tokens | set(self.command_markers) | {self.kind})

    def flag_tokens(self, name: str, value: Any, flag: Flag | None = None) -> list[str]:
        """The argv tokens of one flag.

        ``true`` is the bare flag, ``false`` is ``--no-name`` for a ``boolean_optional`` flag
        (per the catalog entry ``flag``, or this engine's convention without one) and omitted
        otherwise; a list gives ``--name a b``, ``{json: v}`` one compact JSON token,
        ``{repeat: [a, b]}`` gives ``--name a --name b``.
        """
        opt = f"--{name}"
        if value is True:
            return [opt]
        if value is None:
            return []
        if value is False:
            if flag is not None:
                return [f"--no-{name}"] if flag.action == "boolean_optional" else []
            return [f"--no-{name}"] if self.false_default == "no-prefix" else []
        if isinstance(value, list):
            return [opt, *(format_scalar(v) for v in value)]
        if isinstance(value, dict):
            if "json" in value:
                # Compact and in the author's key order, so the token is stable and readable.
                return [opt, json.dumps(value["json"], separators=(",", ":"), ensure_ascii=False)]
            tokens: list[str] = []
            for item in value["repeat"]:
                tokens += [opt, format_scalar(item)]
            return tokens
        return [opt, format_scalar(value)]

    def takes_positional(self, launcher: Iterable[str]) -> bool:
        """Whether this launcher reads :attr:`positional` as positional arguments."""
        return tuple(launcher) in self.positional_launchers

    def render_argv(
        self,
        launcher: Iterable[str],
        flags: Mapping[str, Any],
        catalog: Catalog | None = None,
        before: Iterable[str] = (),
        positional: bool | None = None,
    ) -> list[str]:
        """The whole command: launcher, positional arguments, then the flags in order.

        ``before``: what runs ahead of the launcher's tokens (the service's entrypoint, or the
        image's ENTRYPOINT when the command holds only arguments): ``entrypoint: [vllm]``
        with the launcher ``serve`` takes the model positionally as ``vllm serve`` does.
        ``positional``: False writes them as flags (``--model X``), True positionally; None:
        where the launcher takes them."""
        head = list(launcher)
        rest = dict(flags)
        if self.takes_positional([*before, *head]) if positional is None else positional:
            for name in self.positional:
                if name in rest and isinstance(rest[name], str | int | float):
                    head.append(format_scalar(rest.pop(name)))
        tokens = head
        for name, value in rest.items():
            entry = catalog.lookup(f"--{name}") if catalog is not None else None
            tokens += self.flag_tokens(name, value, entry)
        return tokens

    # --- argv: reading -----------------------------------------------------------------

    def matches_command(self, argv: Iterable[str]) -> bool:
        """Whether a command starts this engine."""
        tokens = list(argv)
        if any(m in tok for tok in tokens for m in self.command_markers):
            return True
        return self._find_launcher(tokens) is not None

    def wrapper_launcher(self, argv: Iterable[str]) -> tuple[str, ...]:
        """The wrapper launcher (:attr:`wrapper_launchers`) that starts ``argv`` before its
        first flag, as written (``/usr/bin/python3 -m dynamo.vllm``); () when none does."""
        tokens = list(argv)
        found = self._find_launcher(tokens[: first_flag(tokens)], self.wrapper_launchers)
        return tuple(tokens[: found[0]]) if found is not None else ()

    def _find_launcher(
        self, tokens: list[str], launchers: tuple[tuple[str, ...], ...] | None = None
    ) -> tuple[int, tuple[str, ...]] | None:
        """(index just after the launcher, the known launcher it is) or None."""
        for known in self.launchers if launchers is None else launchers:
            n = len(known)
            for i in range(len(tokens) - n + 1):
                window = tokens[i : i + n]
                # The program may be a path (/opt/venv/bin/vllm, /usr/bin/python3).
                if window[0].rsplit("/", 1)[-1] == known[0] and window[1:] == list(known[1:]):
                    return i + n, known
        return None

    def split_command(self, argv: Iterable[str]) -> LaunchCommand:
        """Split an engine command into launcher, positional arguments and flags."""
        tokens = list(argv)
        start = first_flag(tokens)
        found = self._find_launcher(tokens[:start])
        if found is None:
            return LaunchCommand(tuple(tokens[:start]), {}, start)
        end, known = found
        positional: dict[str, str] = {}
        if self.takes_positional(known):
            positional = dict(zip(self.positional, tokens[end:start], strict=False))
        return LaunchCommand(tuple(tokens[:end]), positional, start)

    def positional_span(
        self,
        argv: tuple[str, ...] | list[str],
        launcher: Iterable[str],
        positional_here: bool | None = None,
    ) -> tuple[int, dict[str, str]]:
        """(index of the first flag, positional arguments) of an argv that starts with
        ``launcher``; positional arguments are read only where the launcher takes them (or
        where ``positional_here`` says, for a launcher behind an entrypoint)."""
        head = tuple(launcher)
        start = len(head)
        positional: dict[str, str] = {}
        takes = self.takes_positional(head) if positional_here is None else positional_here
        if tuple(argv[:start]) != head or not takes:
            return start, positional
        for name in self.positional:
            if start < len(argv) and not argv[start].startswith("-"):
                positional[name] = argv[start]
                start += 1
        return start, positional

    def spec_flags(
        self, flags: Mapping[str, Any], catalog: Catalog | None = None
    ) -> dict[str, Any]:
        """Flags read from an argv in the spec's spelling: ``no-x: True`` becomes ``x: False``
        where ``--no-x`` is the negative form of a ``boolean_optional`` flag."""
        out: dict[str, Any] = {}
        for name, value in flags.items():
            entry = catalog.lookup(f"--{name}") if catalog is not None and value is True else None
            if entry is not None and f"--{name}" in entry.negations:
                out[entry.name[2:]] = False  # vLLM 0.33: --disable-x sets --enable-x false
            elif name.startswith("no-") and value is True and self._negates(name, catalog):
                out[name[3:]] = False
            else:
                out[name] = value
        return out

    def _negates(self, name: str, catalog: Catalog | None) -> bool:
        if catalog is not None:
            entry = catalog.lookup(f"--{name}")
            return entry is not None and entry.name == f"--{name[3:]}"
        return self.false_default == "no-prefix"

    def command_flags(self, argv: Iterable[str], catalog: Catalog | None = None) -> dict[str, Any]:
        """Flags of a command as the spec writes them (positional arguments under their name;
        bare -> True, one value -> str, several -> list)."""
        tokens = tuple(argv)
        cmd = self.split_command(tokens)
        out: dict[str, Any] = dict(cmd.positional)
        for use in parse_flags(tokens, cmd.flags_start, catalog):
            if not use.token:
                continue
            if not use.values:
                out[use.name] = True
            elif len(use.values) == 1:
                out[use.name] = use.values[0]
            else:
                out[use.name] = list(use.values)
        return out

    # --- metrics -------------------------------------------------------------------------

    @property
    def prefix(self) -> str:
        """The metric prefix as the engine exports it."""
        return self.metric_prefixes[0]

    def owns_metric(self, name: str) -> bool:
        """Whether a series name is this engine's (under any known prefix)."""
        return name.startswith(self.metric_prefixes)

    def detect_prefix(self, names: Iterable[str]) -> str | None:
        """The prefix a metrics pipeline exposes this engine's series under, or None."""
        have = set(names)
        wanted = self.metrics.finished.name
        for prefix in self.metric_prefixes:
            if f"{prefix}{wanted}" in have or f"{prefix}{self.metrics.running}" in have:
                return prefix
        for prefix in self.metric_prefixes:
            if any(n.startswith(prefix) for n in have):
                return prefix
        return None

    def series_prefix(self, names: Iterable[str]) -> str:
        """The prefix a Prometheus holding the metric ``names`` stores this engine's series
        under (as exported, or as a pipeline rewrote it: ``:`` -> ``_``); the exported one when
        none of its series is there yet. The readout and the rollout gates both ask this."""
        return self.detect_prefix(names) or self.prefix

    def selector(self, ref: MetricRef | str, prefix: str | None, matchers: str = "") -> str:
        """A PromQL series selector; the quoted ``__name__`` form keeps ``x:y`` names valid
        in any position."""
        ref = MetricRef(ref) if isinstance(ref, str) else ref
        parts = [f'__name__="{prefix or self.prefix}{ref.name}"']
        parts += [m for m in (ref.matchers, matchers) if m]
        return "{" + ",".join(parts) + "}"

    def variants_query(self, label: str, matchers: str, prefix: str | None = None) -> str:
        """PromQL counting an engine's series by container and variant (one per replica),
        under ``prefix`` (default: as the engine exports it; a ``:`` is valid in a PromQL
        metric name)."""
        sel = f"{prefix or self.prefix}{self.metrics.running}{{{matchers}}}"
        return f"count by (container_name, {label}) ({sel})"

    def sample_total(
        self, samples: Iterable[tuple[str, Mapping[str, str], float]], ref: MetricRef | str
    ) -> float | None:
        """Sum of a family over a scrape's samples (any prefix spelling); None if absent."""
        ref = MetricRef(ref) if isinstance(ref, str) else ref
        names = {p + ref.name for p in self.metric_prefixes}
        want = parse_matchers(ref.matchers)
        values = [v for n, labels, v in samples if n in names and all(m(labels) for m in want)]
        return sum(values) if values else None

    def families(self) -> dict[str, str]:
        """Every family tierctl reads, by role (``ttft``, ``running``...), without prefix."""
        m = self.metrics
        out = {
            "running": m.running,
            "waiting": m.waiting,
            "ttft": f"{m.ttft}_bucket",
            "itl": f"{m.itl}_bucket",
            "e2e": f"{m.e2e}_bucket",
            "prompt_tokens": m.prompt_tokens,
            "generation_tokens": m.generation_tokens,
            "finished": m.finished.name,
            "aborted": m.aborted.name,
        }
        out.update(m.extra)
        return out

    # --- teacher-forced logprobs -------------------------------------------------------------

    #: A substring of the body an engine answers a queue-full rejection with.
    queue_full_text: str = "queue is full"

    @abstractmethod
    def prompt_logprobs_request(self, model: str, text: str) -> tuple[str, dict[str, Any]]:
        """``(path, JSON body)`` of a request that scores every token of ``text`` teacher-forced
        (each position's logprob of the text's token and the engine's top-1 token), generating
        one token at temperature 0."""

    @abstractmethod
    def parse_prompt_logprobs(self, body: Any) -> list[TokenScore]:
        """The scores of the answer to :meth:`prompt_logprobs_request`, from the second token
        on (the first has no context).

        Raises:
            LogprobShapeError: the body is not in the engine's shape.
        """

    # --- logs ------------------------------------------------------------------------------

    def fatal_lines(self, text: str) -> list[tuple[str, str]]:
        """``(pattern name, line)`` for every line of a log matching a fatal pattern."""
        out = []
        for line in text.splitlines():
            for pattern in self.fatal_log_patterns:
                if pattern.search(line):
                    out.append((pattern.name, line))
                    break
        return out

    #: The start-up line naming the device the engine runs on (group 1: ``cuda``, ``cpu``
    #: ...); None when the engine logs none.
    device_log_line: ClassVar[re.Pattern[str] | None] = None

    def log_device(self, text: str) -> str | None:
        """The device a log says the engine ran on (its start-up line), or None."""
        if self.device_log_line is None:
            return None
        match = self.device_log_line.search(text)
        return match.group(1).lower() if match else None

    # --- running argv ----------------------------------------------------------------------

    @abstractmethod
    def verify_running_args(
        self,
        expected_argv: list[str],
        fetch: Fetch,
        log_text: str | None = None,
        catalog: Catalog | None = None,
    ) -> ArgvCheck:
        """Ask a running engine whether it runs ``expected_argv``, the strongest way it allows.

        Args:
            expected_argv: The rendered command.
            fetch: GET a path on the engine.
            log_text: The engine's log since start, where the driver can read it.
            catalog: The pinned release's catalog, for defaults and ``--no-`` spellings.
        """


# --- helpers shared by profiles ------------------------------------------------------------


def format_scalar(value: Any) -> str:
    """One argv token for a scalar: ints and floats as Python prints them, strings as is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


def parse_matchers(text: str) -> list[Callable[[Mapping[str, str]], bool]]:
    """``a="x",b!="y"`` as predicates on a label map (only ``=`` and ``!=``)."""
    out: list[Callable[[Mapping[str, str]], bool]] = []
    pos = 0
    while pos < len(text):
        m = _MATCHER.match(text, pos)
        if m is None:
            raise ValueError(f"unsupported label matcher: {text[pos:]!r}")
        key, op, value = m.group(1), m.group(2), m.group(3)
        out.append(_matcher(key, value, op == "="))
        pos = m.end()
    return out


def _matcher(key: str, value: str, equal: bool) -> Callable[[Mapping[str, str]], bool]:
    def match(labels: Mapping[str, str]) -> bool:
        return (labels.get(key, "") == value) is equal

    return match


def same_value(want: str | bool | tuple[str, ...], got: Any) -> bool:
    """Whether an engine-reported value equals a rendered one (``16384`` == ``"16384"``,
    a bare flag == ``true``, ``0.90`` == ``0.9``)."""
    if isinstance(want, bool):
        return str(got).lower() == str(want).lower()
    if isinstance(want, tuple):
        return isinstance(got, list | tuple) and [str(g) for g in got] == list(want)
    if isinstance(got, bool):
        return want.lower() == str(got).lower()
    if isinstance(got, int | float):
        try:
            return math.isclose(float(want), float(got), rel_tol=1e-9, abs_tol=0.0)
        except ValueError:
            return False
    if isinstance(got, list | tuple):
        return [str(g) for g in got] == [want]
    if isinstance(got, dict):
        try:
            return bool(json.loads(want) == got)
        except ValueError:
            return False
    if got is None:
        return want.lower() in ("none", "null")
    return want == str(got)


#: The largest parallelism factor read as a count (a host has far fewer GPUs; larger is noise).
_MAX_FACTOR = 1 << 20


def _count(value: Any) -> int | None:
    """A parallelism factor as an int, or None when it is not a plain count (``${TP}``,
    ``inf``, ``nan``, ``2.5``, a number too long to be one)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) <= _MAX_FACTOR else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) <= _MAX_FACTOR else None
    text = str(value).strip()
    if len(text) > 8 or not text.lstrip("-").isascii() or not text.lstrip("-").isdigit():
        return None
    return int(text)


def _names_one_of(image: str, known: Iterable[str]) -> bool:
    """Whether an image reference's repository (``registry/repo:tag@digest``) is one of
    ``known`` (a name or a name under any registry)."""
    repo = image.split("@", 1)[0]
    last = repo.rsplit("/", 1)
    tail = last[-1].split(":", 1)[0]
    name = (last[0] + "/" + tail) if len(last) > 1 else tail
    return any(name == k or name.endswith("/" + k) for k in known)
