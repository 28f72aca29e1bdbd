"""A compose file written the way people write them by hand (anchors, merge keys, folded
commands, list-form environment, ${VAR} defaults) validates exactly like the rendered one."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import SMALL_SPEC

HANDWRITTEN = """\
name: qwen-small
x-sglang: &sglang
  image: docker.io/lmsysorg/sglang@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  environment: []
  logging: {driver: json-file}
x-gpu: &gpu {driver: nvidia, capabilities: [gpu]}
services:
  qwen-r1:
    <<: *sglang
    container_name: qwen-r1
    command: >
      python3 -m sglang.launch_server
      --model-path Qwen/Qwen2.5-0.5B-Instruct
      --host 0.0.0.0 --port 30000
      --enable-metrics
    labels: [config_variant=qwen-small-r1, tierctl.tier=qwen-small, tierctl.replica=r1, tierctl.role=none]
    deploy: {resources: {reservations: {devices: [{<<: *gpu, device_ids: ["0"]}]}}}
  qwen-r2:
    <<: *sglang
    container_name: qwen-r2
    command: ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-0.5B-Instruct",
              "--host", "0.0.0.0", "--port", "30000", "--enable-metrics"]
    labels:
      config_variant: qwen-small-r2
      tierctl.tier: qwen-small
      tierctl.replica: r2
      tierctl.role: none
    deploy: {resources: {reservations: {devices: [{<<: *gpu, device_ids: ["1"]}]}}}
  proxy:
    image: docker.io/library/nginx@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210
    ports: ["${PROXY_PORT:-8080}:80"]
    depends_on: [qwen-r1, qwen-r2]
  prometheus:
    image: docker.io/prom/prometheus@sha256:aaaabbbbccccddddeeeeffff0000111122223333444455556666777788889999
    ports: ["9090:9090"]
    configs: [{source: tierctl-scrape, target: /etc/prometheus/prometheus.yml}]
configs:
  tierctl-scrape:
    content: |
      scrape_configs:
        - job_name: qwen-r1
          static_configs:
            - targets: ["qwen-r1:30000"]
              labels: {container_name: qwen-r1, config_variant: qwen-small-r1}
        - job_name: qwen-r2
          static_configs:
            - targets: ["qwen-r2:30000"]
              labels: {container_name: qwen-r2, config_variant: qwen-small-r2}
"""


def _write(tmp_path: Path, text: str) -> tuple[str, str]:
    shutil.copy(SMALL_SPEC, tmp_path / "tier.yaml")
    (tmp_path / "hand.yaml").write_text(text)
    return str(tmp_path / "tier.yaml"), str(tmp_path / "hand.yaml")


def test_handwritten_equivalent_is_clean(run_cli, tmp_path: Path) -> None:
    spec, compose = _write(tmp_path, HANDWRITTEN)
    result = run_cli("validate", "--spec", spec, compose)
    assert result.code == 0, result.out
    assert result.out.startswith("ok: all 7 contracts hold (2 replicas, 4 services")


def test_folded_command_drift_is_caught(run_cli, tmp_path: Path) -> None:
    spec, compose = _write(
        tmp_path, HANDWRITTEN.replace("--host 0.0.0.0 --port 30000", "--host 0.0.0.0 --port 30001")
    )
    result = run_cli("validate", "--spec", spec, compose)
    assert result.code == 1
    [argv] = [line for line in result.out.splitlines() if ": TC001 " in line]
    # A folded string has no per-token lines: the command key is the nearest.
    assert argv.startswith(f"{compose}:11: qwen-r1: TC001 argv-pinning:")
    assert "--port expected '30000', found '30001'" in argv


def test_merge_key_change_reaches_every_replica(run_cli, tmp_path: Path) -> None:
    spec, compose = _write(
        tmp_path, HANDWRITTEN.replace("environment: []", "environment: [DEBUG=1]")
    )
    result = run_cli("validate", "--spec", spec, compose)
    assert result.code == 1
    lines = [line for line in result.out.splitlines() if ": TC003 " in line]
    assert [line.split(": ")[1] for line in lines] == ["qwen-r1", "qwen-r2"]
    assert all("environment DEBUG is not in the spec (found '1')" in line for line in lines)
