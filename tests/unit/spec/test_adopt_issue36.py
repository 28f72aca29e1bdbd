"""``tierctl import`` on the defect classes of issue #36 (unseen public compose files).

Each test is one class: it fails on the code before its fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.adopt import adopt
from tierctl.compose import Interpolation, parse_compose
from tierctl.compose.binary import ComposeBinary
from tierctl.rollout.planner import PlanOptions, plan_files

VLLM = "vllm/vllm-openai:v0.11.0"
DEV = (
    "deploy: {{resources: {{reservations: {{devices: [{{driver: nvidia, device_ids: ['{i}'], "
    "capabilities: [gpu]}}]}}}}}}"
)


def _write(folder: Path, text: str, name: str = "compose.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _rendered_commands(rendered: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    again = parse_compose(rendered, source="(rendered)", interpolation=Interpolation.AS_WRITTEN)
    return {name: (svc.entrypoint or (), svc.command or ()) for name, svc in again.services.items()}


def _in_place(tmp_path: Path, text: str) -> tuple[Path, Path]:
    """Import a file into a spec beside it and write the rendering there too."""
    path = _write(tmp_path, text)
    result = adopt([path], out=tmp_path / "tier.yaml")
    assert result.differences == []
    rendered = tmp_path / result.spec.output
    rendered.write_text(result.rendered, encoding="utf-8")
    return path, rendered


# --- argv kept token for token, in order ---------------------------------------------------

REORDERED = (
    "services:\n"
    "  a:\n"
    f"    image: {VLLM}\n"
    "    entrypoint: [vllm]\n"
    "    command: serve Qwen/Qwen2.5-0.5B-Instruct --port 8000 --max-model-len 4096\n"
    f"    {DEV.format(i=0)}\n"
    "  b:\n"
    f"    image: {VLLM}\n"
    "    entrypoint: [vllm]\n"
    "    command: serve Qwen/Qwen2.5-0.5B-Instruct --max-model-len 4096 --port 8001 --seed 1\n"
    f"    {DEV.format(i=1)}\n"
)


@pytest.mark.parametrize(
    "text",
    [
        REORDERED,
        # The image's ENTRYPOINT is `vllm serve`: the model stays positional...
        f"services:\n  a:\n    image: {VLLM}\n    command: Qwen/X --port 8000\n",
        # ...and a --model stays a flag.
        f"services:\n  a:\n    image: {VLLM}\n    command: --model Qwen/X --port 8000\n",
        f"services:\n  a:\n    image: {VLLM}\n    entrypoint: [vllm, serve]\n"
        "    command: Qwen/X --port 8000\n",
        # Three replicas, each with its own order and flags of its own.
        "services:\n"
        "  a: {image: 'org/llm:1', command: [vllm, serve, --port, '1', --model, m]}\n"
        "  b: {image: 'org/llm:1', command: [vllm, serve, --model, n, --port, '2', --x]}\n"
        "  c: {image: 'org/llm:1', command: [vllm, serve, --port, '3', --y, '9', --model, m]}\n",
    ],
)
def test_argv_renders_token_for_token_in_order(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text)
    result = adopt([path], out=tmp_path / "tier.yaml")
    assert result.differences == []
    original = parse_compose(text, source=str(path), interpolation=Interpolation.AS_WRITTEN)
    mine = {n: (s.entrypoint or (), s.command or ()) for n, s in original.services.items()}
    assert _rendered_commands(result.rendered) == mine


def test_plan_of_the_import_against_the_original_changes_no_command(tmp_path: Path) -> None:
    path, rendered = _in_place(tmp_path, REORDERED)
    plan = plan_files(str(path), str(rendered), PlanOptions())
    for change in plan.services:
        assert "argv" not in change.reasons, change.details
        # Only what the rendering adds (RENDER_ADDITIONS): tierctl's labels, the log driver.
        assert set(change.reasons) <= {"labels", "logging"}, change.details


def test_an_order_the_rendering_cannot_keep_is_a_difference_not_equivalent(
    tmp_path: Path,
) -> None:
    # The official image's ENTRYPOINT already runs `vllm serve`: the file's doubled launcher
    # is dropped by the renderer, so the import must not call the result equivalent.
    text = f"services:\n  a:\n    image: {VLLM}\n    command: [vllm, serve, --model, m]\n"
    result = adopt([_write(tmp_path, text)], out=tmp_path / "tier.yaml")
    assert any("services.a.command" in d for d in result.differences)


# --- gpus: all read as Compose reads it ------------------------------------------------------


def test_validate_of_gpus_all_reports_no_schema_difference(
    tmp_path: Path, compose_binary: ComposeBinary
) -> None:
    from tierctl.contracts.crosscheck import ComposeCheck
    from tierctl.contracts.standalone import validate_files

    text = (
        f"services:\n  a:\n    image: {VLLM}\n    command: --model m --port 8000\n    gpus: all\n"
    )
    check = ComposeCheck(binary=compose_binary.argv[0], environ={"PATH": "/usr/bin:/bin"})
    report = validate_files([_write(tmp_path, text)], compose_check=check)
    assert [v for v in report.violations if v.rule == "TC007"] == [], report.text()


# --- ROCm replicas picking GPUs; engines sharing one GPU by memory fraction ---------------

ROCM = "rocm/vllm:rocm6.3.1_vllm_0.8.5_20250521"


@pytest.mark.parametrize("key", ["HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"])
def test_rocm_replicas_choosing_gpus_import_with_their_gpus(tmp_path: Path, key: str) -> None:
    body = "    devices: [/dev/kfd, /dev/dri]\n    group_add: [video]\n"
    text = (
        "services:\n"
        f"  r1:\n    image: {ROCM}\n{body}    environment: {{{key}: '0,1'}}\n"
        "    command: vllm serve m --port 8000 --tensor-parallel-size 2\n"
        f"  r2:\n    image: {ROCM}\n{body}    environment: {{{key}: '2,3'}}\n"
        "    command: vllm serve m --port 8001 --tensor-parallel-size 2\n"
    )
    result = adopt([_write(tmp_path, text)], out=tmp_path / "tier.yaml")
    assert result.differences == []
    style = {"HIP_VISIBLE_DEVICES": "amd-hip", "ROCR_VISIBLE_DEVICES": "amd-rocr"}[key]
    assert {n: (r.gpu_style, r.gpus) for n, r in result.spec.replicas.items()} == {
        "r1": (style, [0, 1]),
        "r2": (style, [2, 3]),
    }
    assert f'{key}: "2,3"' in result.rendered


@pytest.mark.parametrize(
    ("flag", "image", "command"),
    [
        ("--gpu-memory-utilization", VLLM, "--model m{i} --port 800{i}"),
        (
            "--mem-fraction-static",
            "lmsysorg/sglang:v0.5.9-cu126",
            "python3 -m sglang.launch_server --model-path m{i} --port 3000{i}",
        ),
    ],
)
def test_two_engines_sharing_a_gpu_by_memory_fraction_import_and_validate(
    tmp_path: Path, flag: str, image: str, command: str
) -> None:
    from tierctl.contracts.standalone import validate_files

    services = "".join(
        f"  e{i}:\n    image: {image}\n    command: {command.format(i=i)} {flag} 0.45\n"
        f"    {DEV.format(i=0)}\n"
        for i in (1, 2)
    )
    path = _write(tmp_path, "services:\n" + services)
    result = adopt([path], out=tmp_path / "tier.yaml")
    assert result.differences == []
    assert [r.gpus for r in result.spec.replicas.values()] == [[0], [0]]
    report = validate_files([path])
    assert [v for v in report.violations if "GPU 0" in v.message] == [], report.text()


def test_shares_past_the_whole_gpu_are_still_an_overlap(tmp_path: Path) -> None:
    from tierctl.errors import InputError

    services = "".join(
        f"  e{i}:\n    image: {VLLM}\n    command: --model m --port 800{i}"
        f" --gpu-memory-utilization 0.6\n    {DEV.format(i=0)}\n"
        for i in (1, 2)
    )
    with pytest.raises(InputError, match="GPU 0 is given also to replica e1"):
        adopt([_write(tmp_path, "services:\n" + services)], out=tmp_path / "tier.yaml")


# --- import refuses what Compose refuses, with Compose's reason --------------------------


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        (
            {
                "inc.yml": f"services:\n  vllm:\n    image: {VLLM}\n    command: --model m\n",
                "compose.yaml": f"include: [inc.yml]\nservices:\n  vllm:\n    image: {VLLM}\n"
                "    command: --model n\n",
            },
            "services.vllm conflicts with imported resource",
        ),
        (
            {
                "compose.yaml": f"services:\n  a:\n    image: {VLLM}\n    command: --model m\n"
                "    container_name: llm\n  b:\n    image: nginx:1.27\n    container_name: llm\n"
            },
            'container name "llm" is already in use by service a',
        ),
        (
            {
                "compose.yaml": f"services:\n  a:\n    image: {VLLM}\n    command: --model m\n"
                "    env_file: missing.env\n"
            },
            "missing.env not found",
        ),
    ],
)
def test_import_refuses_a_project_compose_refuses(
    tmp_path: Path,
    run_cli,
    files: dict[str, str],
    reason: str,  # type: ignore[no-untyped-def]
) -> None:
    for name, text in files.items():
        _write(tmp_path, text, name)
    result = run_cli("import", str(tmp_path / "compose.yaml"), "--output", str(tmp_path / "t.yaml"))
    assert result.code == 2, result.err
    assert reason in result.err
    assert "compose.yaml:" in result.err
    assert "fix:" in result.err
    assert "Traceback" not in result.err
    assert not (tmp_path / "t.yaml").exists()


def test_an_unset_required_variable_does_not_refuse_the_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    text = (
        f"services:\n  a:\n    image: {VLLM}\n    command: --model m\n"
        "    environment: {HF_TOKEN: '${HF_TOKEN:?set HF_TOKEN}'}\n"
    )
    result = adopt([_write(tmp_path, text)], out=tmp_path / "t.yaml")
    assert result.differences == []


def test_an_empty_included_file_imports(tmp_path: Path) -> None:
    _write(tmp_path, "", "empty.yml")
    text = f"include: [empty.yml]\nservices:\n  a:\n    image: {VLLM}\n    command: --model m\n"
    result = adopt([_write(tmp_path, text)], out=tmp_path / "t.yaml")
    assert result.differences == []
    assert list(result.spec.replicas) == ["a"]


# --- no false positives ----------------------------------------------------------------------


def test_no_false_positives_on_measures_variable_mounts_and_builds(tmp_path: Path) -> None:
    from tierctl.contracts.standalone import validate_files

    text = (
        "services:\n"
        f"  a:\n    image: {VLLM}\n    command: --model m --port 8000\n"
        "    environment:\n      CHARS_PER_TOKEN_ESTIMATE: ${CPT:-2.0}\n      MAX_TOKEN_COUNT: '4096'\n"
        "    volumes:\n      - ${MODEL_DIR}:${MODEL_DIR}\n"
        "      - ${HF_HOME:-/root/.cache}:${HF_HOME:-/root/.cache}\n"
        "  ui:\n    build: ./ui\n    ports: ['3000:3000']\n"
    )
    path = _write(tmp_path, text)
    report = validate_files([path])
    assert report.violations == (), report.text()
    assert any("build:" in w.message for w in report.warnings)
    strict = validate_files([path], strict=True)
    assert [v.service for v in strict.violations if "build:" in v.message] == ["ui"]
    result = adopt([path], out=tmp_path / "t.yaml")
    assert result.differences == []
    assert result.references == []
    # A built image is no release: the spec keeps every image as written, so validate with
    # the spec does not refuse the build either.
    assert result.spec.engine.image_policy == "as-written"
    assert any(n.startswith("ui: builds its image") for n in result.notes)


def test_a_relative_container_path_is_still_reported(tmp_path: Path) -> None:
    from tierctl.contracts.standalone import validate_files

    text = f"services:\n  a:\n    image: {VLLM}\n    volumes: ['${{D}}:models']\n"
    report = validate_files([_write(tmp_path, text)])
    assert "models" in [v.found for v in report.violations]


# --- a healthcheck probing another port than the engine's --------------------------------


@pytest.mark.parametrize(
    ("command", "test", "reported"),
    [
        ("--model m --port 8000", '["CMD", "curl", "-f", "http://localhost:8080/health"]', True),
        ("--model m --port 8000", '["CMD", "curl", "-f", "http://localhost:8000/health"]', False),
        ("--model m", '"curl -f http://127.0.0.1:8001/health || exit 1"', True),  # default 8000
        ("--model m", '"curl -f http://127.0.0.1:8000/health || exit 1"', False),
    ],
)
def test_a_healthcheck_probing_another_port_is_reported(
    tmp_path: Path, command: str, test: str, reported: bool
) -> None:
    from tierctl.contracts.standalone import validate_files

    text = (
        f"services:\n  a:\n    image: {VLLM}\n    command: {command}\n"
        f"    healthcheck:\n      test: {test}\n"
    )
    path = _write(tmp_path, text)
    found = [v for v in validate_files([path]).violations if "healthcheck" in v.message]
    assert bool(found) is reported
    if reported:
        assert found[0].location is not None
        assert found[0].location.line == 6
        assert found[0].fix


# --- engines recognised, and the ones tierctl has no profile for named -------------------


@pytest.mark.parametrize(
    ("image", "command"),
    [
        ("vllm/vllm-openai-cpu:v0.11.0", "Qwen/Qwen3-0.6B --port 8000 --max-model-len 4096"),
        ("public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.10.2", "--model m --port 8000"),
        ("public.ecr.aws/q9t5s3a7/vllm-arm64-cpu-release-repo:v0.10.2", "m --port 8000"),
        # An image of vLLM's own build whose ENTRYPOINT is `vllm`.
        ("ghcr.io/acme/vllm:0.11.0-custom", "serve Qwen/Qwen3-0.6B --port 8000 --dtype half"),
    ],
)
def test_vllm_images_are_recognised_and_round_trip(
    tmp_path: Path, image: str, command: str
) -> None:
    text = f"services:\n  llm:\n    image: {image}\n    command: {command}\n"
    path = _write(tmp_path, text)
    result = adopt([path], out=tmp_path / "tier.yaml")
    assert result.differences == []
    assert result.spec.engine.kind == "vllm"
    assert list(result.spec.replicas) == ["llm"]
    original = parse_compose(text, source=str(path), interpolation=Interpolation.AS_WRITTEN)
    assert _rendered_commands(result.rendered)["llm"][1] == original.services["llm"].command


@pytest.mark.parametrize(
    ("service", "named"),
    [
        (
            "image: ghcr.io/huggingface/text-generation-inference:2.4.0\n"
            "    command: --model-id m --port 80",
            "Text Generation Inference",
        ),
        (
            "image: nvcr.io/nvidia/tensorrt-llm/release:0.21.0\n    command: trtllm-serve m",
            "TensorRT-LLM",
        ),
        (
            "image: ghcr.io/ggml-org/llama.cpp:server-cuda\n    command: -m /m.gguf --port 8080",
            "llama.cpp",
        ),
        ("image: ollama/ollama:0.5.7", "Ollama"),
        ("image: ubuntu:24.04\n    command: llama-server -m /m.gguf", "llama.cpp"),
    ],
)
def test_a_project_of_another_engine_is_refused_naming_it(
    tmp_path: Path,
    run_cli,
    service: str,
    named: str,  # type: ignore[no-untyped-def]
) -> None:
    text = f"services:\n  llm:\n    {service}\n  ui:\n    image: ghcr.io/open-webui/open-webui:v0.5.0\n"
    path = _write(tmp_path, text)
    result = run_cli("import", str(path), "--output", str(tmp_path / "t.yaml"))
    assert result.code == 2, result.err
    assert named in result.err
    assert "service llm runs" in result.err
    assert "compose.yaml:2" in result.err
    assert "Traceback" not in result.err


# --- ${VAR:+--flag ${VAR}} in a string command -------------------------------------------


@pytest.mark.parametrize("quant", [None, "awq"])
def test_a_reference_that_expands_to_words_round_trips_under_compose(
    tmp_path: Path, compose_binary: ComposeBinary, quant: str | None
) -> None:
    from tierctl.catalog.store import shipped
    from tierctl.compose.binary import compose_config
    from tierctl.contracts.validation import validate

    text = (
        "services:\n  a:\n    image: vllm/vllm-openai:v0.33.0\n"
        '    command: "--model m --port 8000 ${EXTRA:-} ${QUANT:+--quantization ${QUANT}}"\n'
    )
    path = _write(tmp_path, text)
    result = adopt([path], out=tmp_path / "tier.yaml")
    assert result.differences == []
    assert result.spec.engine.argv_tail == "${EXTRA:-} ${QUANT:+--quantization ${QUANT}}"
    rendered = tmp_path / result.spec.output
    rendered.write_text(result.rendered, encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", **({"QUANT": quant} if quant else {})}
    original = compose_config([path], binary=compose_binary, env=env)
    again = compose_config([rendered], binary=compose_binary, env=env)
    assert again["services"]["a"]["command"] == original["services"]["a"]["command"]
    if ("vllm", "0.33.0") in shipped():
        report = validate(result.spec, [parse_compose(result.rendered, source=str(rendered))])
        assert report.ok, report.text()


def test_a_reference_with_a_blank_is_one_word_read_as_written(
    tmp_path: Path, compose_binary: ComposeBinary
) -> None:
    from tierctl.compose.binary import compose_config
    from tierctl.compose.forms import split_command

    line = "--model ${MODEL:?set MODEL} --port 8000 $${NOT A REF}"
    assert split_command(line, references=True) == (
        "--model",
        "${MODEL:?set MODEL}",
        "--port",
        "8000",
        "$${NOT",
        "A",
        "REF}",
    )
    assert split_command(line)[:3] == ("--model", "${MODEL:?set", "MODEL}")
    text = f"services:\n  a:\n    image: {VLLM}\n    command: --model ${{MODEL:?set MODEL}} --port 8000\n"
    path = _write(tmp_path, text)
    result = adopt([path], out=tmp_path / "tier.yaml")
    assert result.differences == []
    assert result.spec.engine.args["model"] == "${MODEL:?set MODEL}"
    rendered = tmp_path / result.spec.output
    rendered.write_text(result.rendered, encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "MODEL": "Qwen/Qwen2.5-7B-Instruct"}
    original = compose_config([path], binary=compose_binary, env=env)
    again = compose_config([rendered], binary=compose_binary, env=env)
    assert again["services"]["a"]["command"] == original["services"]["a"]["command"]


def test_a_base_service_without_a_command_renders_none(tmp_path: Path) -> None:
    text = (
        f"services:\n  base:\n    image: {VLLM}\n    ipc: host\n    profiles: [never]\n"
        "  r1:\n    extends: base\n    command: --model m --port 8000\n    profiles: !reset []\n"
    )
    result = adopt([_write(tmp_path, text)], out=tmp_path / "tier.yaml")
    assert result.differences == []
    assert _rendered_commands(result.rendered)["base"] == ((), ())
    assert "command: []" not in result.rendered


# --- bash -c scripts over several lines, with the author's quoting ------------------------


def test_an_engine_on_one_line_of_a_multi_line_script_keeps_its_quoting(
    tmp_path: Path, compose_binary: ComposeBinary
) -> None:
    from tierctl.catalog.store import shipped
    from tierctl.compose.binary import compose_config
    from tierctl.contracts.validation import validate

    text = (
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.33.0\n"
        "    environment: {MODEL: Qwen/Qwen2.5-7B-Instruct}\n"
        "    entrypoint: [/bin/bash, -c]\n"
        "    command:\n      - |\n        set -e\n        echo starting\n"
        '        exec vllm serve "$${MODEL}" --port 8000 --max-model-len 8192\n'
    )
    path = _write(tmp_path, text)
    result = adopt([path], out=tmp_path / "tier.yaml")
    assert result.differences == []
    shell = result.spec.engine.shell
    assert shell is not None
    assert shell.spelling == {"$${MODEL}": '"$${MODEL}"'}
    rendered = tmp_path / result.spec.output
    rendered.write_text(result.rendered, encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin"}
    original = compose_config([path], binary=compose_binary, env=env)
    again = compose_config([rendered], binary=compose_binary, env=env)
    assert again["services"]["vllm"]["command"] == original["services"]["vllm"]["command"]
    if ("vllm", "0.33.0") in shipped():
        report = validate(result.spec, [parse_compose(result.rendered, source=str(rendered))])
        assert report.ok, report.text()


def test_a_documentation_placeholder_is_no_credential(tmp_path: Path) -> None:
    from tierctl.contracts.standalone import validate_files
    from tierctl.credentials import literal_secret

    assert not literal_secret("HUGGING_FACE_HUB_TOKEN", "<hugging_face_token>")
    assert literal_secret("HUGGING_FACE_HUB_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz")
    text = (
        f"services:\n  a:\n    image: {VLLM}\n    command: --model m\n"
        "    environment: [HUGGING_FACE_HUB_TOKEN=<hugging_face_token>]\n"
    )
    report = validate_files([_write(tmp_path, text)])
    assert report.violations == (), report.text()


def test_replicas_spelling_flags_differently_keep_each_spelling(tmp_path: Path) -> None:
    text = (
        "services:\n"
        f"  a:\n    image: {VLLM}\n    command: [--model, m, --port=8000, --host, 0.0.0.0]\n"
        f"  b:\n    image: {VLLM}\n    command: [--model, m, --port, '8001', --host=0.0.0.0]\n"
    )
    path = _write(tmp_path, text)
    result = adopt([path], out=tmp_path / "tier.yaml")
    assert result.differences == []
    original = parse_compose(text, source=str(path), interpolation=Interpolation.AS_WRITTEN)
    mine = {n: (s.entrypoint or (), s.command or ()) for n, s in original.services.items()}
    assert _rendered_commands(result.rendered) == mine


def test_a_project_env_file_left_behind_is_said(tmp_path: Path) -> None:
    _write(tmp_path / "p", "MODEL=m\n", ".env")
    path = _write(
        tmp_path / "p", f"services:\n  a:\n    image: {VLLM}\n    command: --model ${{MODEL}}\n"
    )
    result = adopt([path], out=tmp_path / "spec" / "tier.yaml")
    assert any(".env" in n and "--env-file" in n for n in result.notes)
    beside = adopt([path], out=tmp_path / "p" / "tier.yaml")
    assert not any(".env" in n for n in beside.notes)


def test_a_service_name_in_capitals_or_with_dots_is_kept_for_its_replica(tmp_path: Path) -> None:
    text = (
        f"services:\n  vLLM.Main:\n    image: {VLLM}\n    command: --model m --port 8000\n"
        "  proxy:\n    image: nginx:1.27\n    depends_on: [vLLM.Main]\n"
    )
    result = adopt([_write(tmp_path, text)], out=tmp_path / "tier.yaml")
    assert result.differences == []
    assert list(result.spec.replicas) == ["vllm-main"]
    assert result.spec.replicas["vllm-main"].service == "vLLM.Main"
    assert "vLLM.Main" in _rendered_commands(result.rendered)


@pytest.mark.parametrize("key", [None, "sk-local"])
def test_an_unset_reference_in_a_string_command_gives_no_word_either_way(
    tmp_path: Path, compose_binary: ComposeBinary, key: str | None
) -> None:
    from tierctl.compose.binary import compose_config

    text = (
        f"services:\n  a:\n    image: {VLLM}\n"
        "    command: --model m --api-key ${VLLM_API_KEY} --port 8000\n"
    )
    path = _write(tmp_path, text)
    result = adopt([path], out=tmp_path / "tier.yaml")
    assert result.differences == []
    assert result.spec.engine.command_string is True
    rendered = tmp_path / result.spec.output
    rendered.write_text(result.rendered, encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", **({"VLLM_API_KEY": key} if key else {})}
    original = compose_config([path], binary=compose_binary, env=env)
    again = compose_config([rendered], binary=compose_binary, env=env)
    assert again["services"]["a"]["command"] == original["services"]["a"]["command"]


def test_an_include_project_directory_from_a_relative_path_is_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(
        tmp_path / "p" / "eng",
        f"services:\n  vllm:\n    image: {VLLM}\n    command: --model m\n"
        "    volumes: ['./cache:/root/.cache']\n",
        "compose.yaml",
    )
    _write(tmp_path / "p", "include:\n  - path: eng/compose.yaml\n    project_directory: eng\n")
    monkeypatch.chdir(tmp_path)
    result = adopt([Path("p/compose.yaml")], out=Path("spec/tier.yaml"))
    assert result.differences == []
    assert str(tmp_path / "p" / "eng" / "cache") in result.rendered
