"""Engines the local driver starts get only the environment they need, never tierctl's token."""

from __future__ import annotations

from tierctl.rollout.drivers.local import child_environment


def test_the_agent_token_and_other_credentials_never_pass() -> None:
    parent = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "TIERCTL_AGENT_TOKEN": "s3cret",
        "AWS_SECRET_ACCESS_KEY": "x",
        "HF_TOKEN": "hf_x",
        "GITHUB_TOKEN": "ghp_x",
        "HF_TOKEN_PATH": "/run/secrets/hf",
        "TOKENIZERS_PARALLELISM": "false",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "LC_ALL": "C.UTF-8",
        "RANDOM_OTHER": "1",
    }
    env = child_environment(parent)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "HF_TOKEN_PATH": "/run/secrets/hf",
        "TOKENIZERS_PARALLELISM": "false",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "LC_ALL": "C.UTF-8",
    }
