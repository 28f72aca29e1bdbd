"""Reproducers of issue #22 (hostile input), each now a located exit 2 (or a plain result).

Every test is built from the minimal file that crashed or hung a command: it names the
exception or hang it pinned, and fails again if the reader or model that now refuses the
value stops doing so.
"""

from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, CliResult
from tests.fuzzing import PATH_FORMS

SMALL = EXAMPLES / "small-model"
RunCli = Callable[..., CliResult]


def _spec(tmp_path: Path, old: str, new: str, name: str = "tier.yaml") -> Path:
    text = (SMALL / "tier.yaml").read_text()
    assert old in text, old
    out = tmp_path / name
    out.write_text(text.replace(old, new, 1))
    return out


def _compose(tmp_path: Path, old: str, new: str) -> Path:
    text = (SMALL / "compose.yaml").read_text()
    assert old in text, old
    i = text.rindex(old)  # the last replica's (qwen-r2's)
    out = tmp_path / "compose.yaml"
    out.write_text(text[:i] + new + text[i + len(old) :])
    return out


def _refused(result: CliResult, *words: str) -> None:
    assert result.code == 2, result
    assert "Traceback" not in result.err
    for word in words:
        assert word in result.err, (word, result.err)


# --- import: spec/adopt.py _gpus, _spec_document; spec/semantic_diff.py _devices ------------

_IDS = '              device_ids:\n                - "1"'
_RES = "      resources:\n        reservations:\n"


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        # AttributeError: 'str' object has no attribute 'get' (_gpus)
        (
            _RES,
            "      resources: x\n      x-was:\n        reservations:\n",
            ["resources", "object"],
        ),
        # AttributeError: 'list' object has no attribute 'get' (_gpus, then _devices)
        (
            "        reservations:\n          devices:",
            "        reservations: [1]\n        x-was:\n          devices:",
            ["reservations", "object"],
        ),
        # logging given as a string reached the grouping code (_spec_document / deep_merge)
        (
            "    logging:\n      driver: json-file\n    deploy:",
            "    logging: json-file\n    deploy:",
            ["logging", "object"],
        ),
    ],
)
def test_import_refuses_wrong_shapes_with_their_line(
    tmp_path: Path, run_cli: RunCli, old: str, new: str, words: list[str]
) -> None:
    path = _compose(tmp_path, old, new)
    result = run_cli("import", "--engine", "sglang==0.5.23", str(path))
    _refused(result, *words)
    assert "compose.yaml:" in result.err  # located


@pytest.mark.parametrize(
    "ids",
    [
        '["²"]',  # ValueError: invalid literal for int() with base 10: '²' (isdigit said yes)
        '["' + "9" * 5000 + '"]',  # ValueError: Exceeds the limit (4300 digits) for int()
    ],
)
def test_import_keeps_device_ids_it_cannot_read_as_written(
    tmp_path: Path, run_cli: RunCli, ids: str
) -> None:
    """Such ids were int()-ed and crashed import. They are no GPU index (``_GPU_INDEX``):
    import now keeps the grant as written (``gpu_style: as-written``, adopt's rule for any
    grant it does not render) and says the GPU fit is not checked."""
    path = _compose(tmp_path, _IDS, f"              device_ids: {ids}")
    result = run_cli("import", "--engine", "sglang==0.5.23", str(path))
    assert result.code == 0, result
    assert "Traceback" not in result.err
    assert "gpu_style: as-written" in result.out
    assert "GPU fit not checked" in result.err


def test_semantic_diff_compares_a_misshapen_deploy_as_written() -> None:
    from tierctl.compose import Interpolation, parse_compose
    from tierctl.spec.semantic_diff import semantic_diff

    text = "services:\n  a:\n    image: x\n    deploy: {resources: [1]}\n"
    a = parse_compose(text, source="a", interpolation=Interpolation.AS_WRITTEN)
    b = parse_compose(
        text.replace("[1]", "{reservations: x}"), source="b", interpolation=Interpolation.AS_WRITTEN
    )
    assert semantic_diff(a, a) == []
    assert semantic_diff(a, b) != []


# --- the spec model: catalog/store.py load_catalog, render/files.py, render/compose.py ------


def test_a_700_character_version_is_refused_not_an_oserror(tmp_path: Path, run_cli: RunCli) -> None:
    # OSError: [Errno 36] File name too long (the catalog path was built from it).
    spec = _spec(tmp_path, "version: 0.5.23", 'version: "' + "1" * 700 + '"')
    for cmd in ("show", "render"):
        _refused(run_cli(cmd, str(spec)), "engine.version")


@pytest.mark.parametrize("version", ["1" * 700, "0.5.23/../../x", "0.5.23\x00"])
def test_load_catalog_checks_the_release_shape(version: str) -> None:
    from tierctl.catalog.store import load_catalog
    from tierctl.errors import InputError

    with pytest.raises(InputError, match="not an engine release"):
        load_catalog("sglang", version)


def test_validate_with_a_long_image_tag_release(tmp_path: Path, run_cli: RunCli) -> None:
    # Without --spec the release comes from the image tag: the same path, the same refusal.
    path = _compose(
        tmp_path,
        '    image: "docker.io/lmsysorg/sglang@sha256:0123456789abcdef0123456789abcdef'
        '0123456789abcdef0123456789abcdef"\n    container_name: qwen-r2',
        '    image: "lmsysorg/sglang:v' + "1" * 700 + '"\n    container_name: qwen-r2',
    )
    result = run_cli("validate", str(path))
    assert result.code in (0, 1, 2), result
    assert "Traceback" not in result.err


def test_a_nul_in_output_is_refused(tmp_path: Path, run_cli: RunCli) -> None:
    # ValueError: embedded null byte (Path.resolve in check_output_inside).
    spec = _spec(tmp_path, "output: compose.yaml", 'output: "a\\0b.yaml"')
    for args in (["render", "--write"], ["render", "--check"], ["render"], ["show"]):
        _refused(run_cli(*args, str(spec)), "output", "NUL")


@pytest.mark.parametrize(
    "fragment",
    [
        "logging: json-file",  # ValueError: dictionary update sequence element (deep_merge)
        "logging: {options: 3}",
        "deploy: [1, 2]",
        "deploy: {resources: x}",
        "deploy: {resources: {reservations: 7}}",
    ],
)
@pytest.mark.parametrize("where", ["engine", "replica"])
def test_replica_compose_fragments_need_mapping_shapes(
    tmp_path: Path, run_cli: RunCli, fragment: str, where: str
) -> None:
    if where == "engine":
        spec = _spec(
            tmp_path,
            "  service: qwen-{replica}\n",
            f"  service: qwen-{{replica}}\n  compose: {{{fragment}}}\n",
        )
    else:
        spec = _spec(tmp_path, "  r1: {gpus: [0]}", f"  r1: {{gpus: [0], compose: {{{fragment}}}}}")
    for cmd in ("render", "show"):
        _refused(run_cli(cmd, str(spec)), "must be a mapping" if "devices" not in fragment else "")


# --- engines/base.py gpus_needed --------------------------------------------------------


@pytest.mark.parametrize(
    "value", [float("inf"), float("nan"), 10**400, "1" + "0" * 400, "inf", "${TP}", 2.5, True]
)
def test_gpus_needed_is_none_for_what_is_not_a_count(value: object) -> None:
    from tierctl.engines import profile_for

    profile = profile_for("sglang")
    # OverflowError: cannot convert float infinity to integer; integer division too large.
    assert profile.gpus_needed({"tp-size": value}) is None


def test_gpus_needed_still_counts() -> None:
    from tierctl.engines import profile_for

    assert profile_for("sglang").gpus_needed({"tp-size": 4, "pp-size": "2"}) == 8


def test_an_infinite_tp_size_in_a_compose_file(tmp_path: Path, run_cli: RunCli) -> None:
    path = _compose(
        tmp_path,
        '      - "30000"\n',
        '      - "30000"\n      - --tp-size\n      - "1' + "0" * 400 + '"\n',
    )
    for args in (
        ["validate", str(path)],
        ["validate", "--spec", str(SMALL / "tier.yaml"), str(path)],
    ):
        result = run_cli(*args)
        assert result.code in (0, 1, 2), result
        assert "Traceback" not in result.err


# --- show: spec strings are text, never rich markup ----------------------------------------


def test_show_prints_markup_characters_as_written(tmp_path: Path, run_cli: RunCli) -> None:
    # MarkupError: closing tag '[/bold]' ... doesn't match any open tag.
    spec = _spec(tmp_path, "host: gpu01", 'host: "gpu[/]01"')
    result = run_cli("show", str(spec))
    assert result.code == 0, result
    assert "gpu[/]01" in result.out


def test_show_keeps_a_bracketed_variant(tmp_path: Path, run_cli: RunCli) -> None:
    # "[fp8]" was read as a style tag and vanished from the table.
    spec = _spec(tmp_path, 'variant: "qwen-small-{replica}"', 'variant: "q[fp8]-{replica}"')
    result = run_cli("show", str(spec))
    assert result.code == 0, result
    assert "q[fp8]-r1" in result.out
    assert "q[fp8]-r2" in result.out


def test_show_prints_a_100_kb_host_whole(tmp_path: Path, run_cli: RunCli) -> None:
    # rich's highlighter ran quadratic regexes over it (minutes); no highlighting now.
    host = "h" * 100_000
    spec = _spec(tmp_path, "host: gpu01", f"host: {host}")
    result = run_cli("show", str(spec))
    assert result.code == 0, result
    assert result.out.count("h") >= 100_000


# --- sim run / compare: numeric engine args -------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--hicache-ratio", "nan", "--enable-hierarchical-cache"],  # int(NaN)
        ["--hicache-ratio", "inf", "--enable-hierarchical-cache"],  # int(inf)
        ["--dynamic-batch-tokenizer-batch-timeout", "nan"],
        ["--chunked-prefill-size", "1" + "0" * 30],
        ["--prefill-decode-interval", "1" + "0" * 20],
    ],
)
def test_sim_refuses_non_finite_and_huge_numbers(run_cli: RunCli, argv: list[str]) -> None:
    _refused(run_cli("sim", "run", "--workload", "burst", "--count", "1", "--", *argv), argv[0])


def test_vllm_human_sizes_refuse_infinity(run_cli: RunCli) -> None:
    # OverflowError: cannot convert float infinity to integer (32k-style sizes).
    result = run_cli(
        "sim", "run", "--engine", "vllm", "--workload", "burst", "--count", "1", "--",
        "--max-num-batched-tokens", "infk",
    )  # fmt: skip
    _refused(result, "--max-num-batched-tokens")


@pytest.mark.parametrize("cmd", ["run", "compare"])
def test_a_huge_prefill_decode_interval_finishes(run_cli: RunCli, cmd: str) -> None:
    # 10**15 deferred rounds were stepped one by one (a hang); they are spun as one now.
    big = str(10**15)
    if cmd == "run":
        result = run_cli(
            "sim", "run", "--workload", "burst", "--count", "2", "--input-tokens", "20000",
            "--output-tokens", "4", "--", "--prefill-decode-interval", big,
        )  # fmt: skip
    else:
        result = run_cli(
            "sim", "compare", "--workload", "burst", "--count", "2", "--input-tokens", "20000",
            "--output-tokens", "4", "--control", "--prefill-decode-interval 1",
            "--candidate", f"--prefill-decode-interval {big}",
        )  # fmt: skip
    assert result.code == 0, result


def test_spinning_deferred_rounds_equals_stepping_them() -> None:
    """The fast path is exact: the same results as stepping every deferred round."""
    from tierctl.sim import EngineConfig, SimRequest, Workload, simulate
    from tierctl.sim.cost import PRESETS

    cost = next(iter(PRESETS.values()))
    cfg = EngineConfig.from_argv(
        ["--prefill-decode-interval", "300", "--chunked-prefill-size", "4096"]
    )
    wl = Workload.of("w", [SimRequest(f"r{i}", 0.05 * i, 9000 + 1000 * i, 3) for i in range(4)])
    fast = simulate(cfg, wl, cost)
    slow = simulate(cfg, wl, cost, fast_forward=False)
    assert [r.ttft_s for r in fast.requests] == pytest.approx([r.ttft_s for r in slow.requests])


# --- traces are streamed -------------------------------------------------------------------


def test_reading_a_trace_holds_rows_not_the_file(tmp_path: Path) -> None:
    """A 400 MB trace took 2.2 GB: the text, its split lines and the rows at once. Streamed,
    the rows are all that stays: a trace of long lines costs little more than its rows."""
    from tierctl.traces import read_trace

    pad = "x" * 4000
    path = tmp_path / "t.jsonl"
    with path.open("w") as fh:
        for i in range(2000):  # 8 MB of text
            fh.write(
                f'{{"arrival_s": {i}, "input_tokens": 10, "output_tokens": 2, "pad": "{pad}"}}\n'
            )
    tracemalloc.start()
    try:
        rows = read_trace(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(rows) == 2000
    assert peak < path.stat().st_size / 4, peak  # far below the file's size


def test_a_bad_byte_in_a_streamed_trace_is_located(tmp_path: Path) -> None:
    from tierctl.errors import InputError
    from tierctl.traces import read_trace

    path = tmp_path / "t.jsonl"
    path.write_bytes(
        b'{"arrival_s": 0, "input_tokens": 1, "output_tokens": 1}\n{"arrival_s": 1\xff}\n'
    )
    with pytest.raises(InputError) as info:
        read_trace(path)
    assert info.value.location is not None
    assert info.value.location.line == 2


# --- sim fit step logs (found by benchmarks/fuzz.py --generator both, seed 7007) -------------


@pytest.mark.parametrize(
    "line",
    [
        "[" * 20000 + "]" * 20000,  # RecursionError in json.loads
        '{"kind": "prefill", "duration_s": 1, "new_tokens": 1e400}',  # int(inf): OverflowError
        '{"kind": "decode", "duration_s": 1, "batch_size": [1], "context_tokens": 2}',
        # Seed 610002 input 2744: a chunk of 1e308 tokens squared to inf; the fit's SVD did
        # not converge (numpy LinAlgError).
        '{"kind": "prefill", "chunks": [[1e+308, 64]], "duration_s": 0.01}',
        '{"kind": "prefill", "chunks": [[-5, 0]], "duration_s": 0.01}',
        '{"kind": "decode", "duration_s": NaN, "batch_size": 1, "context_tokens": 2}',
        '{"kind": "decode", "duration_s": 1e999, "batch_size": 1, "context_tokens": 2}',
    ],
)
def test_a_hostile_step_log_line_is_located(tmp_path: Path, run_cli: RunCli, line: str) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text(
        '{"kind": "decode", "duration_s": 0.01, "batch_size": 1, "context_tokens": 9}\n'
        + line
        + "\n"
    )
    result = run_cli("sim", "fit", str(path), "--from", "steps", "--format", "json")
    _refused(result, "steps.jsonl:2")


def test_import_with_one_replica_container_unnamed(tmp_path: Path, run_cli: RunCli) -> None:
    # StopIteration in _spec_document (found by the long run, seed 9009).
    path = _compose(tmp_path, "    container_name: qwen-r2\n", "")
    result = run_cli("import", "--engine", "sglang==0.5.23", str(path))
    assert result.code in (0, 1, 2), result
    assert "Traceback" not in result.err


# --- bench prints workload strings as text, not rich markup (issue #22, session 6) -----------


def _bench_record(lanes: tuple[str, ...], label: str = "A", scale: float = 1.0) -> object:
    from tierctl.bench.samples import ProbeSample, RequestSample, RunRecord

    reqs = tuple(
        RequestSample(
            index=i,
            lane=lane,
            scheduled_s=0.0,
            sent_s=0.01 * i,
            queue_s=0.0,
            ttft_s=0.5 * scale,
            e2e_s=1.0 * scale,
            itl_s=(0.1,) * 3,
            input_tokens=5,
            output_tokens=4,
            planned_input_tokens=5,
            outcome="completed",
        )
        for i, lane in enumerate(lanes)
    )
    probes = (ProbeSample(0.0, 0.01, 200),)
    return RunRecord("http://127.0.0.1:1", label, "2026-01-01T00:00:00+00:00", 1.0, reqs, probes, 2)


#: Lane names a workload file may carry: `[/]` was a MarkupError, `[fp8]` vanished as a style.
MARKUP_NAMES = ("[/]", "[fp8]", "[bold]x[/bold]")


def test_bench_run_table_prints_lane_names_as_written() -> None:
    from rich.console import Console

    from tierctl.bench.report import run_table

    console = Console(width=300, record=True)
    console.print(run_table(_bench_record(MARKUP_NAMES)))  # type: ignore[arg-type]
    text = console.export_text()
    for name in MARKUP_NAMES:
        assert name in text, (name, text)


def test_bench_ab_table_prints_lane_names_as_written() -> None:
    from rich.console import Console

    from tierctl.bench.ab import ABResult, Block, compare_arms
    from tierctl.bench.report import ab_table

    lanes = MARKUP_NAMES * 2
    blocks = tuple(
        Block(0, k, arm, _bench_record(lanes, arm, 1.0 if arm == "A" else 0.5))  # type: ignore[arg-type]
        for k, arm in enumerate("ABBA")
    )
    result = ABResult("http://a", "http://b", "ABBA", 1, blocks, False)
    console = Console(width=400, record=True)
    console.print(ab_table(result, compare_arms(result, list(MARKUP_NAMES))))
    text = console.export_text()
    for name in MARKUP_NAMES:
        assert name in text, (name, text)


# --- sim's writers replace only with force (issue #22, session 6) ---------------------------


@pytest.mark.parametrize("writer", ["steps", "jsonl"])
def test_sim_writers_refuse_to_overwrite_a_file_they_did_not_write(
    tmp_path: Path, writer: str
) -> None:
    """write_steps / write_jsonl opened the path with "w": someone's file was gone."""
    import random

    from tierctl.errors import InputError
    from tierctl.sim.engine import Round
    from tierctl.sim.steplog import write_steps
    from tierctl.sim.workload import hammer
    from tierctl.sim.workload_traces import write_jsonl

    def write(path: Path, *, force: bool = False) -> None:
        if writer == "steps":
            rounds = [Round(0.0, 0.01, "decode", (), batch_size=2, context_tokens=9)]
            write_steps(rounds, path, force=force)
        else:
            write_jsonl(hammer(random.Random(0), rate_per_s=2.0, duration_s=2.0), path, force=force)

    victim = tmp_path / "theirs.jsonl"
    victim.write_text("someone's data\n")
    with pytest.raises(InputError) as err:
        write(victim)
    assert "refusing to overwrite" in err.value.format(), err.value.format()
    assert victim.read_text() == "someone's data\n"
    write(victim, force=True)
    assert victim.read_text() != "someone's data\n"
    # Writing the same content again is no overwrite; a new path is written.
    write(victim)
    write(tmp_path / "new.jsonl")
    assert (tmp_path / "new.jsonl").read_text() == victim.read_text()


# --- found by benchmarks/fuzz.py at size (session 6) -----------------------------------------


def _results_file(tmp_path: Path, **sample: object) -> Path:
    import json

    from tierctl.results import results_document

    base = {"outcome": "completed", "sent_s": 0.1, "input_tokens": 800, "output_tokens": 4}
    base.update({"ttft_s": 0.05, "tpot_s": 0.01, "itl_s": [0.01, 0.01, 0.01]})
    requests = [dict(base, sent_s=0.1 * k) for k in range(8)]
    run = {"sent": 8, "completed": 8, "failed": 0, "timed_out": 0, "requests": requests}
    doc = results_document("run", "tierctl fuzz", {}, {"run": run})
    text = json.dumps(doc).replace('"input_tokens": 800', '"input_tokens": 6000', 1)
    for key, value in sample.items():
        text = text.replace(f'"{key}": ', f'"{key}": {value}, "_was": ', 1)
    out = tmp_path / "results.json"
    out.write_text(text)
    return out


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("input_tokens", "1e400"),
        ("output_tokens", "-1e400"),
        ("ttft_s", "NaN"),
        ("sent_s", "Infinity"),
    ],
)
def test_sim_fit_bench_refuses_non_finite_sample_numbers(
    tmp_path: Path, run_cli: RunCli, key: str, value: str
) -> None:
    """Seed 610002 input 546: `"input_tokens": 1e400...` read as inf, and `int(inf)` in
    `ResultsRun.completed_requests` was an OverflowError out of `sim fit --from bench`."""
    path = _results_file(tmp_path, **{key: value})
    _refused(
        run_cli("sim", "fit", str(path), "--from", "bench", "--format", "json"),
        "requests[0]",
        "finite",
    )


# --- validate is linear in a collector config's size (issue #22: 8 MB took 57 s) -----------


def _collector_compose(tmp_path: Path, jobs: int) -> Path:
    """The small example with ``jobs`` more scrape jobs in its collector's config content."""
    text = (SMALL / "compose.yaml").read_text()
    anchor = "        - job_name: qwen-r1\n"
    extra = "".join(
        f"        - job_name: extra-{k}\n          scrape_interval: 15s\n"
        f"          static_configs:\n            - targets:\n"
        f'                - "extra-{k}:9000"\n              labels:\n'
        f"                container_name: extra-{k}\n                team: t{k}\n"
        for k in range(jobs)
    )
    i = text.index(anchor)
    out = tmp_path / f"compose-{jobs}.yaml"
    out.write_text(text[:i] + extra + text[i:])
    return out


def test_validate_work_grows_linearly_with_the_collector_config(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """Operations, not seconds: the Python and C calls validate makes, counted with
    sys.setprofile, for a collector config of n, 2n and 4n scrape jobs. Each doubling may at
    most double the count (plus a little); a per-job scan of the whole content (or any other
    quadratic in Python) grows it fourfold."""
    import sys

    spec = tmp_path / "tier.yaml"
    spec.write_text((SMALL / "tier.yaml").read_text())
    # Imports and first-use caches warmed on another content (the parsed content itself is
    # cached by its text: a warm run of the same file would count nothing).
    run_cli(
        "validate", "--no-compose-binary", "--spec", str(spec), str(_collector_compose(tmp_path, 7))
    )
    counts = []
    for jobs in (150, 300, 600):
        compose = _collector_compose(tmp_path, jobs)
        calls = 0

        def count(frame: object, event: str, arg: object) -> None:
            nonlocal calls
            calls += 1

        sys.setprofile(count)
        try:
            result = run_cli("validate", "--no-compose-binary", "--spec", str(spec), str(compose))
        finally:
            sys.setprofile(None)
        assert result.code in (0, 1), result
        counts.append(calls)
    for small, big in itertools.pairwise(counts):
        assert big <= 2.2 * small, counts


def test_a_trace_keeps_each_block_hash_once(tmp_path: Path) -> None:
    """A 400 MB trace took 2.2 GB: a mooncake row's hash ids were one int object each per row
    (28 bytes), though rows share their prompt prefixes. Equal ids are now one object."""
    from tierctl.traces import read_trace

    prefix = [10**9 + k for k in range(20)]
    path = tmp_path / "m.jsonl"
    with path.open("w") as fh:
        for i in range(50):
            ids = ", ".join(map(str, [*prefix, 2 * 10**9 + i]))
            fh.write(
                f'{{"timestamp": {i}, "input_length": 11000, "output_length": 3, '
                f'"hash_ids": [{ids}]}}\n'
            )
    rows = read_trace(path, "mooncake")
    assert [list(r.hash_ids[:20]) for r in rows] == [prefix] * 50
    distinct = {id(h) for r in rows for h in r.hash_ids}
    assert len(distinct) == 20 + 50, len(distinct)  # the shared prefix once, each tail once


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("decode_per_ctx_token_s", "1e+308"),  # seed 610002 input 2880: int(NaN) in the engine
        ("prefill_attn_pair_s", "1e300"),
        ("step_jitter", "1e6"),
        ("kv_pool_tokens", "1e30"),
        ("round_overhead_s", "Infinity"),
    ],
)
def test_a_cost_model_coefficient_must_be_bounded(
    tmp_path: Path, run_cli: RunCli, field: str, value: str
) -> None:
    """A finite but huge coefficient made every simulated step inf, then NaN in the
    fast-forward's round count: `ValueError: cannot convert float NaN to integer`."""
    import json
    import re

    from tierctl.sim.cost import DEFAULT_PRESET, preset
    from tierctl.sim.costfile import cost_model_doc

    text = json.dumps(cost_model_doc(preset(DEFAULT_PRESET), {"fitted_on": ["x"]}))
    text, n = re.subn(f'"{field}": [^,}}]+', f'"{field}": {value}', text)
    assert n == 1
    path = tmp_path / "m.json"
    path.write_text(text)
    small = ("--workload", "burst", "--count", "2", "--input-tokens", "2000", "--output-tokens")
    result = run_cli("sim", "run", "--cost-model", str(path), *small, "4", "--format", "json")
    _refused(result, f"model.{field}")


# --- the input path itself: symlinks, FIFOs, devices, folders --------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("form", PATH_FORMS)
def test_every_input_kind_through_a_special_path_ends_with_a_message(
    tmp_path: Path, form: str
) -> None:
    """A FIFO with no writer, /dev/zero, /dev/urandom, a directory, a dangling symlink or a
    loop given where a file belongs: every command of every kind reads it as the file or
    refuses it with a message, within its budget (a blocked open of the FIFO is a hang)."""
    from tests.fuzzing import KINDS, check_law, load_seeds

    seeds = load_seeds(tmp_path)
    for kind in KINDS:
        check_law(kind, 0, seeds.by_kind[kind][0], seeds, tmp_path, timeout_s=60.0, form=form)


def test_a_long_run_input_is_rebuilt_from_its_number(tmp_path: Path) -> None:
    """benchmarks/fuzz.py's workers share a stream by index: input n depends on (generator,
    seed, n) only, so `--only N` rebuilds exactly what a worker ran."""
    from tests.fuzzing import load_seeds
    from tests.schema_fuzz import input_at

    seeds = load_seeds(tmp_path)
    first = [input_at(seeds, "both", 770, n) for n in range(40)]
    again = [input_at(seeds, "both", 770, n) for n in reversed(range(40))][::-1]
    assert first == again
    assert len({data for _, _, data, _ in first}) > 30  # not one input repeated
    assert {kind for kind, _, _, _ in first} >= {"spec", "compose", "plan", "jsonl"}
