"""Request and response bodies of `patarm serve` (pydantic models; FastAPI validates them → 422).

`/v1/judge` items carry what the judge needs to score one response; `/get_reward` follows
OpenRLHF's remote reward-model contract; `/v1/chat/completions` is the OpenAI subset a judge needs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# A request id may be echoed in headers and logs: keep it short and printable.
REQUEST_ID_PATTERN = r"^[A-Za-z0-9._:\-]{1,128}$"
MAX_SAMPLES = 16  # judge rollouts per item (voting@n); more belongs in an offline `patarm judge` run


class Message(BaseModel):
    """One chat turn."""

    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant", "tool"]
    content: str


class SkillResource(BaseModel):
    """A sample-specific resource mounted into a skill for this item (viewed by the judge, never run)."""

    id: str = Field(pattern=r"^[A-Za-z0-9._\-]{1,64}$")
    type: Literal["rubric", "checklist", "constraint", "reference", "calibration"]
    content: str
    description: str = ""


class JudgeItem(BaseModel):
    """One response to score: the conversation (`prompt`, text or messages) and the `response`."""

    model_config = ConfigDict(extra="forbid")
    prompt: str | list[Message]
    response: str
    id: str | None = Field(default=None, max_length=128, description="Echoed back; the client's own name.")
    domain: str | None = Field(default=None, max_length=64, description="Rubric domain (e.g. math, code, chat).")
    template: str | None = Field(default=None, max_length=64, description="A bundled judge template name.")
    rubric_mode: Literal["primary", "generated", "adaptive"] | None = None
    skill: str | None = Field(default=None, max_length=64, description="A skill of the bundled bank (static routing).")
    resources: list[SkillResource] = Field(default_factory=list, max_length=32)
    n: int = Field(default=1, ge=1, le=MAX_SAMPLES, description="Judge rollouts; the reward is their mean.")

    @field_validator("prompt")
    @classmethod
    def _non_empty(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("prompt messages must not be empty")
        return value


class JudgeRequest(BaseModel):
    """A batch of items; `request_id` makes a retried request idempotent (same id, same body → one answer)."""

    model_config = ConfigDict(extra="forbid")
    items: list[JudgeItem] = Field(min_length=1)
    request_id: str | None = Field(default=None, pattern=REQUEST_ID_PATTERN)


class JudgmentOut(BaseModel):
    """The parsed judgment fields of one rollout (see `patarm.judge.judgment.Judgment`)."""

    score: float | None
    tags_ok: bool
    errors: list[str]
    rubric: str | None = None
    criteria: list[str] = Field(default_factory=list)
    evaluation: str | None = None
    think: str | None = None
    evidence: list[dict[str, Any]] = Field(default_factory=list)
    text: str


class JudgeResult(BaseModel):
    id: str | None
    scores: list[float | None]
    mean: float | None = Field(description="Mean of the valid scores; null when no rollout gave a valid score.")
    judgments: list[JudgmentOut]


class JudgeResponse(BaseModel):
    request_id: str | None
    model: str
    results: list[JudgeResult]


class RewardRequest(BaseModel):
    """OpenRLHF's remote RM body: `query` = prompt + response as the policy's chat template rendered them.

    `prompts` (the rendered prompts, sent by OpenRLHF ≥ 0.5) make the split exact; `labels` are ignored.
    """

    model_config = ConfigDict(extra="ignore")
    query: list[str] = Field(min_length=1)
    prompts: list[str] | None = None
    labels: list[Any] | None = None


class RewardResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]


class ChatRequest(BaseModel):
    """The OpenAI chat-completions fields the judge honours; unknown fields are ignored as vLLM does."""

    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    n: int = Field(default=1, ge=1, le=MAX_SAMPLES)
    stream: bool = False
    seed: int | None = None
