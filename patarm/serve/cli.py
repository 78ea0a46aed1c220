"""`patarm serve`: serve a judge over HTTP for RL frameworks (TRL, verl, OpenRLHF) and other tools.

    patarm serve --model runs/quickstart/export [--backend hf|vllm] [--host 127.0.0.1] [--port 8000]
                 [--token-env VAR | --token-file F] [--max-batch 32] [--max-wait-ms 10] [--max-queue 1024]
                 [--max-body-bytes 4194304] [--timeout-s 300]

Endpoints: POST /v1/judge, POST /get_reward (OpenRLHF), POST /v1/chat/completions, GET /health,
GET /metrics. It listens on loopback unless --host says otherwise; with a token every route but
/health needs `Authorization: Bearer <token>`. SIGINT/SIGTERM finish the in-flight requests first.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Callable, NoReturn

from patarm.serve.server import is_loopback

USAGE = ("patarm serve --model PATH_OR_SPEC [--backend hf|vllm] [--host 127.0.0.1] [--port N] "
         "[--token-env VAR | --token-file F] [--max-batch N] [--max-wait-ms MS] [--max-queue N] "
         "[--max-body-bytes N] [--timeout-s S]")


class _Parser(argparse.ArgumentParser):
    """Bad flags: one paragraph (what is wrong, the usage, where to read more) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        fail(message)


def fail(message: str) -> NoReturn:
    print(f"patarm serve: {message}. Usage: {USAGE}. Run `patarm serve --help` for every option.", file=sys.stderr)
    sys.exit(2)


def _positive(kind: type) -> Callable[[str], float]:
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    parse.__name__ = f"positive {kind.__name__}"
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="patarm serve", description=__doc__.split("\n\n")[0], usage=USAGE)
    p.add_argument("--model", required=True, help="A saved judge folder, a hub id, or `tiny` (random, smoke tests).")
    p.add_argument("--backend", choices=["hf", "vllm"], default="hf", help="transformers (CPU/GPU) or vLLM (GPU).")
    p.add_argument("--host", default="127.0.0.1", help="Interface to listen on (default loopback only).")
    p.add_argument("--port", type=int, default=8000, help="TCP port; 0 picks a free one (logged).")
    auth = p.add_mutually_exclusive_group()
    auth.add_argument("--token-env", metavar="VAR", help="Require the bearer token held in this environment variable.")
    auth.add_argument("--token-file", metavar="F", help="Require the bearer token held in this file (first line).")
    p.add_argument("--max-batch", type=_positive(int), default=32, help="Most items per model batch.")
    p.add_argument("--max-wait-ms", type=float, default=10.0, help="Longest wait to fill a batch (ms).")
    p.add_argument("--max-queue", type=_positive(int), default=1024, help="Most items waiting; more get 429.")
    p.add_argument("--max-body-bytes", type=_positive(int), default=4 * 1024 * 1024, help="Larger bodies get 413.")
    p.add_argument("--timeout-s", type=_positive(float), default=300.0, help="Requests not answered by then get 408.")
    p.add_argument("--max-new-tokens", type=_positive(int), default=1024, help="Judge output length (tokens).")
    p.add_argument("--temperature", type=float, default=0.0, help="Judge sampling temperature (0: greedy).")
    p.add_argument("--template", default="pointwise", help="Default judge template (items may name another).")
    p.add_argument("--rubric-mode", choices=["primary", "generated", "adaptive"], default=None)
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    return p


def read_token(token_env: str | None, token_file: str | None) -> str | None:
    """The configured bearer token, or None; a named but empty source is an error (never served open)."""
    if token_env:
        token = os.environ.get(token_env, "").strip()
        if not token:
            fail(f"--token-env {token_env}: the environment variable is unset or empty")
        return token
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as fh:
                token = fh.readline().strip()
        except OSError as err:
            fail(f"--token-file {token_file}: cannot read it ({err.strerror})")
        if not token:
            fail(f"--token-file {token_file}: the file is empty")
        return token
    return None


def check_model(model: str) -> None:
    """A spec that names a local folder must exist (hub ids such as `org/name` are left to transformers)."""
    from patarm.models import parse_tiny_spec

    try:
        if parse_tiny_spec(model) is not None:
            return
    except ValueError as err:
        fail(f"--model: {err}")
    first = model.split("/")[0]
    looks_local = os.path.isabs(model) or model.startswith(".") or (first != model and os.path.isdir(first))
    if looks_local and not os.path.isdir(model):
        fail(f"--model {model}: no such folder (give a saved judge folder, a hub id or `tiny`)")


def main(argv: list[str] | None = None) -> None:
    ns = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if not 0 <= ns.port <= 65535:
        fail(f"--port must be 0..65535, got {ns.port}")
    if ns.max_wait_ms < 0:
        fail(f"--max-wait-ms must be >= 0, got {ns.max_wait_ms:g}")
    token = read_token(ns.token_env, ns.token_file)
    check_model(ns.model)
    logging.basicConfig(level=getattr(logging, ns.log_level.upper()), format="%(levelname)s: %(message)s")
    if not is_loopback(ns.host) and token is None:
        logging.warning("patarm serve: listening on %s without a token: anyone who can reach it can use the judge "
                        "(pass --token-env or --token-file)", ns.host)

    from patarm.serve.app import ServeConfig, create_app
    from patarm.serve.scorer import load_scorer
    from patarm.serve.server import bind, serve_forever

    try:
        sock = bind(ns.host, ns.port)  # before loading the model: a taken port fails in a second, not minutes
    except OSError as err:
        fail(f"--host {ns.host} --port {ns.port}: cannot listen there ({err.strerror or err})")
    try:
        scorer = load_scorer(ns.model, ns.backend, max_new_tokens=ns.max_new_tokens, temperature=ns.temperature,
                             batch_size=ns.max_batch, template=ns.template, rubric_mode=ns.rubric_mode)
    except (OSError, ValueError, ImportError) as err:
        sock.close()
        fail(f"--model {ns.model}: cannot load it ({type(err).__name__}: {str(err).splitlines()[0][:300]})")
    config = ServeConfig(max_batch=ns.max_batch, max_wait_ms=ns.max_wait_ms, max_queue=ns.max_queue,
                         max_body_bytes=ns.max_body_bytes, timeout_s=ns.timeout_s, model_name=scorer.name,
                         token=token)
    serve_forever(create_app(scorer, config), sock, log_level=ns.log_level,
                  graceful_timeout_s=ns.timeout_s, limit_concurrency=ns.max_queue + 64)


if __name__ == "__main__":
    main()
