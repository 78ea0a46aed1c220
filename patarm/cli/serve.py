"""`patarm serve`: serve a judge over HTTP for RL frameworks (TRL, verl, OpenRLHF) and other tools.

    patarm serve [--model {run_dir}/export] [--backend hf|vllm] [--host 127.0.0.1] [--port 8000]
                 [--token_env VAR | --token_file F] [--max_batch 32] [--max_wait_ms 10] [--max_queue 1024]
                 [--max_body_bytes 4194304] [--timeout_s 300] [--head_timeout_s 10] [--max_head_bytes 65536]
                 [--max_connections 1024] [--dtype auto|float32|bfloat16|float16] [--score_readout score|verdict-lines]

Endpoints: POST /v1/judge, POST /get_reward (OpenRLHF), POST /v1/chat/completions, GET /health,
GET /metrics. It listens on loopback unless --host says otherwise; with a token every route but
/health needs `Authorization: Bearer <token>`. SIGINT/SIGTERM finish the in-flight requests first.
The judge template, rubric mode and judgment length default to what the judge was trained with.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from patarm.config import RunArguments
from patarm.models.settings import JudgeOptions, judge_field


@dataclass
class ServeArguments(RunArguments):
    """Serve a judge over HTTP."""

    model: str = field(
        default="{run_dir}/export",
        metadata={
            "path": "input",
            "help": "a saved judge folder, a model spec (hub id, gguf:FILE, smollm2) or `tiny` (random, smoke tests)",
        },
    )
    backend: str = field(
        default="hf", metadata={"help": "transformers (CPU/GPU) or vLLM (GPU)", "choices": ["hf", "vllm"]}
    )
    host: str = field(default="127.0.0.1", metadata={"help": "interface to listen on (default: loopback only)"})
    port: int = field(default=8000, metadata={"help": "TCP port; 0 picks a free one (logged)"})
    token_env: str | None = field(
        default=None, metadata={"help": "require the bearer token held in this environment variable"}
    )
    token_file: str | None = field(
        default=None, metadata={"help": "require the bearer token held in this file (first line)"}
    )
    max_batch: int = field(default=32, metadata={"help": "most items per model batch"})
    max_wait_ms: float = field(default=10.0, metadata={"help": "longest wait to fill a batch (ms)"})
    max_queue: int = field(default=1024, metadata={"help": "most items waiting; more get 429"})
    max_body_bytes: int = field(default=4 * 1024 * 1024, metadata={"help": "larger bodies get 413"})
    timeout_s: float = field(default=300.0, metadata={"help": "requests not answered by then get 408"})
    head_timeout_s: float = field(default=10.0, metadata={"help": "a connection must send a whole request head "
                                  "within this many seconds of opening or of its last answer (else 408, closed)"})
    max_head_bytes: int = field(default=64 * 1024, metadata={"help": "larger request heads get 431"})
    max_connections: int = field(default=1024, metadata={"help": "open connections; past it the one idle longest "
                                 "is closed"})
    max_new_tokens: int | None = judge_field("max_new_tokens")
    max_prompt_tokens: int | None = judge_field("max_prompt_tokens")
    temperature: float | None = judge_field("temperature", help="judge sampling temperature (default 0: greedy)")
    template: str | None = judge_field("template", help="default judge template (items may name another; default: "
                                       "the judge's own)")
    rubric_mode: str | None = judge_field("rubric_mode")
    dtype: str | None = field(default=None, metadata={
        "help": "the judge's weights dtype with --backend hf (default: as saved); auto: bfloat16 where the device "
                "computes in it natively (a CPU with AMX/AVX512-BF16, a bf16 GPU), else float32",
        "choices": ["auto", "float32", "bfloat16", "float16"]})
    score_readout: str = field(default="score", metadata={
        "help": "how a judgment becomes its score: `score`, the number it writes (the paper's); `verdict-lines`, "
                "the judge's belief in its own `name :: ... :: pass|fail` lines: lo + (hi - lo) x the mean P(pass) "
                "over them, read after its own text (one forward pass a line; --backend hf; a judgment without such "
                "lines keeps its written score)", "choices": ["score", "verdict-lines"]})
    log_level: str = field(default="info", metadata={"help": "uvicorn's log level",
                                                     "choices": ["critical", "error", "warning", "info", "debug"]})

    def __post_init__(self) -> None:
        for name in ("max_batch", "max_queue", "max_body_bytes", "timeout_s", "head_timeout_s", "max_head_bytes",
                     "max_connections"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be > 0, got {getattr(self, name)}")
        JudgeOptions.of(self)
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be 0..65535, got {self.port}")
        if self.max_wait_ms < 0:
            raise ValueError(f"--max_wait_ms must be >= 0, got {self.max_wait_ms:g}")
        if self.token_env and self.token_file:
            raise ValueError("give --token_env or --token_file, not both")
        if self.score_readout != "score" and self.backend != "hf":
            raise ValueError(f"--score_readout {self.score_readout} reads the judge's logits: it needs --backend hf")
        if self.dtype and self.backend != "hf":
            raise ValueError(f"--dtype applies to --backend hf; vLLM picks its own (got --backend {self.backend})")


def read_token(token_env: str | None, token_file: str | None) -> str | None:
    """The configured bearer token, or None; a named but empty source is an error (never served open)."""
    if token_env:
        token = os.environ.get(token_env, "").strip()
        if not token:
            raise ValueError(f"--token_env {token_env}: the environment variable is unset or empty")
        return token
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as fh:
                token = fh.readline().strip()
        except OSError as err:
            raise ValueError(f"--token_file {token_file}: cannot read it ({err.strerror})") from None
        if not token:
            raise ValueError(f"--token_file {token_file}: the file is empty")
        return token
    return None


def main(command: str, argv: list[str]) -> None:
    from patarm.config import parse_stage
    from patarm.models.settings import resolve_judge_options
    from patarm.serve.server import is_loopback

    (args,) = parse_stage((ServeArguments,), argv, prog="patarm serve", description=__doc__)
    token = read_token(args.token_env, args.token_file)
    if not is_loopback(args.host) and token is None:
        logging.getLogger("patarm.serve").warning(
            "listening on %s without a token: anyone who can reach it can use the judge (pass --token_env or "
            "--token_file)", args.host)
    values, _ = resolve_judge_options(args.model, JudgeOptions.of(args), "pointwise")

    from patarm.serve.app import ServeConfig, create_app
    from patarm.serve.scorer import load_scorer
    from patarm.serve.server import bind, serve_forever

    try:
        sock = bind(args.host, args.port)  # before loading the model: a taken port fails in a second, not minutes
    except OSError as err:
        raise OSError(f"--host {args.host} --port {args.port}: cannot listen there ({err.strerror or err})") from None
    try:
        scorer = load_scorer(args.model, args.backend, max_new_tokens=values["max_new_tokens"],
                             temperature=values["temperature"], batch_size=args.max_batch, template=values["template"],
                             rubric_mode=values["rubric_mode"], enable_thinking=values["enable_thinking"],
                             max_prompt_tokens=values["max_prompt_tokens"], dtype=args.dtype,
                             readout=args.score_readout)
    except BaseException:
        sock.close()
        raise
    config = ServeConfig(max_batch=args.max_batch, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                         max_body_bytes=args.max_body_bytes, timeout_s=args.timeout_s, model_name=scorer.name,
                         token=token)
    serve_forever(create_app(scorer, config), sock, log_level=args.log_level,
                  graceful_timeout_s=args.timeout_s, head_timeout_s=args.head_timeout_s,
                  max_head_bytes=args.max_head_bytes, max_connections=args.max_connections)
