"""`patarm serve`: a judge behind HTTP for RL frameworks and tools (see docs/serve.md).

* `scorer`   — the judge-facing interface (`Scorer`, `JudgeScorer`, `load_scorer`); no HTTP;
* `app`      — the FastAPI app: /v1/judge, /get_reward (OpenRLHF), /v1/chat/completions, /health, /metrics;
* `batching` — dynamic batching across requests with a bounded queue; `guard` — auth and size limits;
* `server`   — uvicorn in the foreground or on a thread; `cli` — `patarm serve`;
* `client`   — a retrying client; `adapters` — TRL, verl and OpenRLHF reward functions.
"""
