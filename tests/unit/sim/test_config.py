"""EngineConfig.from_argv: a real SGLang argv is accepted whole, modelled flags are typed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierctl.errors import InputError
from tierctl.sim.config import _MODELLED, EngineConfig, default_catalog

_SGLANG = default_catalog("sglang")

FULL = [
    "python3", "-m", "sglang.launch_server", "--model-path", "/models/x", "--tp-size", "4",
    "--dist-init-addr", "127.0.0.1:29510", "--enable-hierarchical-cache", "--hicache-ratio", "2",
    "--port", "30001", "--host", "127.0.0.1", "--cuda-graph-bs", "1", "2", "4",
    "--prefill-decode-interval", "2", "--enable-dynamic-batch-tokenizer",
    "--chunked-prefill-size=16384", "--mem-fraction-static", "0.82", "--trust-remote-code",
]  # fmt: skip


def test_full_argv_models_the_flags_that_matter() -> None:
    cfg = EngineConfig.from_argv(FULL)
    assert (cfg.tp_size, cfg.port, cfg.host) == (4, 30001, "127.0.0.1")
    assert cfg.prefill_decode_interval == 2
    assert cfg.chunked_prefill_size == 16384
    assert cfg.enable_dynamic_batch_tokenizer is True
    assert cfg.enable_hierarchical_cache is True
    assert cfg.hicache_ratio == 2.0
    assert cfg.model_name == "/models/x"


def test_unmodelled_flags_are_kept_with_their_values() -> None:
    args = EngineConfig.from_argv(FULL).server_args()
    assert args["dist_init_addr"] == "127.0.0.1:29510"
    assert args["cuda_graph_bs"] == [1, 2, 4]
    assert args["mem_fraction_static"] == 0.82
    assert args["trust_remote_code"] is True


def test_served_model_name_overrides_the_path() -> None:
    cfg = EngineConfig.from_argv(["--model-path", "/m/a", "--served-model-name", "glm"])
    assert cfg.model_name == "glm"
    assert cfg.server_args()["served_model_name"] == "glm"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--prefill-decode-interval", "-1"], "--prefill-decode-interval must be >= 0"),
        (["--prefill-decode-interval", "two"], "--prefill-decode-interval"),
        (["--max-queued-requests", "0"], "--max-queued-requests must be >= 1"),
        (["--port"], "--port needs a value"),
        (["stray"], "unexpected argument 'stray'"),
    ],
)
def test_bad_modelled_values_are_input_errors(argv: list[str], needle: str) -> None:
    with pytest.raises(InputError) as exc:
        EngineConfig.from_argv(argv)
    assert needle in exc.value.format()
    assert exc.value.exit_code == 2


_names = st.from_regex(r"[a-z][a-z0-9]{1,8}(-[a-z0-9]{1,6}){0,2}", fullmatch=True).filter(
    lambda n: (
        n not in _MODELLED
        and not n.startswith(("enable-", "disable-"))
        # a unique prefix of a real flag is that flag, as the engine's parser reads it
        # (`--se` is `--served-model-name`), so it is not an unmodelled flag
        and _SGLANG.lookup(f"--{n}") is None
    )
)
# (text on the command line, the typed value it must come back as), built independently of
# the parser: integers, decimals, booleans and plain words.
_NOT_WORDS = {"inf", "nan", "infinity", "true", "false"}
_values = st.one_of(
    st.integers(-5, 10**6).map(lambda n: (str(n), n)),
    st.integers(1, 999).map(lambda n: (f"{n}.5", n + 0.5)),
    st.sampled_from([("true", True), ("True", True), ("false", False), ("False", False)]),
    st.from_regex(r"[A-Za-z/][A-Za-z/:._0-9]{0,11}", fullmatch=True)
    .filter(lambda v: v.lower() not in _NOT_WORDS)
    .map(lambda v: (v, v)),
)


@given(st.dictionaries(_names, _values, max_size=6))
def test_any_unmodelled_flag_is_accepted_and_reported(flags: dict[str, tuple[str, object]]) -> None:
    argv = [tok for k, (text, _) in flags.items() for tok in (f"--{k}", text)]
    args = EngineConfig.from_argv(["--model-path", "/m", *argv]).server_args()
    for k, (_, expected) in flags.items():
        got = args[k.replace("-", "_")]
        assert got == expected, k
        assert type(got) is type(expected), k
