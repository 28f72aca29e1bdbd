"""What the quality lane asks: the ``quality:`` section of a workload file (or CLI flags)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from tierctl.engines import kinds


def _engine_or_auto(value: str) -> str:
    if value != "auto" and value not in kinds():
        raise ValueError(f"unknown engine {value!r}; one of auto, {', '.join(kinds())}")
    return value


#: ``auto`` (ask the server) or an engine kind with a profile (read from ``PROFILES``).
EngineOrAuto = Annotated[str, AfterValidator(_engine_or_auto)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TeacherForcedSpec(_Model):
    """Texts scored token by token on both arms."""

    count: int = Field(24, ge=0, le=10_000, description="Generated texts (0: none).")
    tokens: int = Field(96, ge=4, le=1_000_000, description="Length of each generated text.")
    path: str | None = Field(
        None, description='JSONL of {"text"} or {"prompt", "reference"} to score instead.'
    )


class PasskeySpec(_Model):
    """Passkey retrieval at chosen context lengths."""

    lengths: tuple[int, ...] = Field(
        (), description="Context lengths in tokens (keep them within the tier's longest)."
    )
    per_length: int = Field(5, ge=1, le=1000, description="Haystacks per length.")


class TaskSetSpec(_Model):
    """A JSONL task set an operator points at."""

    name: str = Field(description="Lane name in reports (e.g. gsm8k-sample).")
    path: str = Field(description='JSONL of {"prompt", "answer", "choices"?}, relative paths '
                      "from the workload file.")  # fmt: skip
    scoring: Literal["exact", "number", "choice"] = Field(
        "exact", description="How an output is checked (choice when lines have choices)."
    )
    limit: int | None = Field(None, ge=1, description="Use only the first N items.")


class QualitySpec(_Model):
    """The quality lane: teacher-forced agreement, passkey, task sets, and the noise floor."""

    teacher_forced: TeacherForcedSpec = Field(
        default_factory=TeacherForcedSpec, description="Teacher-forced agreement."
    )
    passkey: PasskeySpec = Field(default_factory=PasskeySpec, description="Passkey retrieval.")
    arithmetic: int = Field(30, ge=0, le=100_000, description="Generated arithmetic items.")
    tasks: tuple[TaskSetSpec, ...] = Field((), description="JSONL task sets.")
    max_tokens: int = Field(16, ge=1, le=4096, description="Greedy tokens per task answer.")
    floor: bool = Field(True, description="Measure arm A twice (A vs A') to get the noise floor.")
    concurrency: int = Field(4, ge=1, le=256, description="Requests in flight per arm.")
    timeout_s: float = Field(300.0, gt=0, description="Per-request timeout.")
    alpha: float = Field(0.05, gt=0, lt=1, description="Level of the floor and McNemar tests.")
    engine: EngineOrAuto = Field(
        "auto", description="Whose logprob request shape to use (auto: ask the server)."
    )
    seed: int = Field(0, description="Seed of every generated item.")
