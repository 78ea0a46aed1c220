"""The `patarm serve` ASGI app (FastAPI): judge, OpenRLHF reward, chat completions, health and metrics.

`create_app(scorer, config)` builds it around any `Scorer`; `patarm.serve.server` runs it on uvicorn.
Every model call goes through one `DynamicBatcher`; the routes only validate, queue and answer.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from patarm.serve.batching import BatcherClosed, DynamicBatcher, QueueFull
from patarm.serve.guard import Guard
from patarm.serve.idempotency import IdempotencyCache, IdempotencyConflict, body_hash
from patarm.serve.metrics import CONTENT_TYPE, ServeMetrics
from patarm.serve.queries import split_query
from patarm.serve.schemas import (
    REQUEST_ID_PATTERN,
    ChatRequest,
    JudgeRequest,
    JudgeResponse,
    JudgeResult,
    JudgmentOut,
    RewardRequest,
    RewardResponse,
)
from patarm.serve.scorer import PromptTooLong, Sampling, ScoreItem, Scorer, ScoreResult

JUDGE_KEY = "judge"
log = logging.getLogger("patarm.serve")


@dataclass
class ServeConfig:
    """Limits and batching of one server. Times in seconds unless named `_ms`; sizes in bytes or items."""

    max_batch: int = 32
    max_wait_ms: float = 10.0
    max_queue: int = 1024
    max_body_bytes: int = 4 * 1024 * 1024
    timeout_s: float = 300.0
    max_items: int = 256  # items per request (also capped by max_queue)
    max_chat_tokens: int = 2048
    invalid_reward: float | None = None  # /get_reward for an unparseable judgment; None → lowest score
    model_name: str = "patarm-judge"
    token: str | None = field(default=None, repr=False)  # never printed


def _judgment_out(j: Any) -> JudgmentOut:
    return JudgmentOut(score=j.score, tags_ok=j.tags_ok, errors=j.errors, rubric=j.rubric, criteria=j.criteria,
                       evaluation=j.evaluation, think=j.think, evidence=[asdict(e) for e in j.evidence], text=j.text)


def _to_item(item: Any) -> ScoreItem:
    prompt = item.prompt if isinstance(item.prompt, str) else [m.model_dump() for m in item.prompt]
    return ScoreItem(prompt=prompt, response=item.response, domain=item.domain, template=item.template,
                     rubric_mode=item.rubric_mode, skill=item.skill, resources=[r.model_dump() for r in item.resources],
                     n=item.n)


class _Service:
    """The state behind the routes: scorer, batcher, metrics, idempotency cache and limits."""

    def __init__(self, scorer: Scorer, config: ServeConfig, metrics: ServeMetrics):
        self.scorer, self.config, self.metrics = scorer, config, metrics
        self.idempotency = IdempotencyCache()
        self.prep_pool = ThreadPoolExecutor(1, thread_name_prefix="patarm-serve-prepare")
        self.batcher = DynamicBatcher(self._run, max_batch=config.max_batch, max_wait_s=config.max_wait_ms / 1000,
                                      max_queue=config.max_queue, on_batch=metrics.observe_batch,
                                      on_depth=metrics.queue_depth.set)

    def _run(self, key: Hashable, payloads: list[Any]) -> list[Any]:
        """On the model thread: one batch of prepared judge items, or of chat conversations."""
        if key == JUDGE_KEY:
            results: list[ScoreResult] = self.scorer.run(payloads)
            for r in results:
                self.metrics.observe_judgments(len(r.scores), r.parse_failures)
            return results
        return self.scorer.complete(payloads, key[1])

    def check_items(self, count: int, rollouts: int | None = None) -> None:
        """Refuse (413) a request over the item limit, or whose rollouts (items × n) alone overflow the queue."""
        limit = min(self.config.max_items, self.config.max_queue)
        if count > limit:
            raise HTTPException(413, f"{count} items in one request; the limit is {limit} (split the batch)")
        if rollouts is not None and rollouts > self.config.max_queue:
            raise HTTPException(413, f"{rollouts} judge rollouts (items × n) in one request; the queue holds "
                                     f"{self.config.max_queue} (split the batch or lower n)")

    async def off_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run blocking preparation (rendering, tokenising, fitting prompts) on the preparation thread, so the
        event loop keeps answering (/health, other requests) while a large request is prepared."""
        return await asyncio.get_running_loop().run_in_executor(self.prep_pool, fn, *args)

    async def prepare(self, items: list[ScoreItem], what: str = "items") -> list[Any]:
        return await self.off_loop(self._prepare_all, items, what)

    def _prepare_all(self, items: list[ScoreItem], what: str) -> list[Any]:
        prepared = []
        for i, item in enumerate(items):
            try:
                prepared.append(self.scorer.prepare(item))
            except PromptTooLong as err:
                raise HTTPException(413, redact(f"{what}[{i}]: {err}")) from None
            except ValueError as err:
                raise HTTPException(400, redact(f"{what}[{i}]: {err}")) from None
        return prepared

    @staticmethod
    def request_id(request: Request, in_body: str | None = None) -> str | None:
        """The request's id: the body's `request_id`, else the `X-Request-Id` header (checked like the body's)."""
        rid = in_body or request.headers.get("x-request-id")
        if rid is not None and not re.fullmatch(REQUEST_ID_PATTERN, rid):
            raise HTTPException(400, "X-Request-Id must be 1-128 characters of A-Z a-z 0-9 . _ : -")
        return rid

    async def execute(self, request: Request, request_id: str | None,
                      start: Callable[[], Awaitable[Any]]) -> Any:
        """Run `start()` within the time limit; with a request id, at most once per id (see idempotency)."""
        if request_id:
            try:
                task = self.idempotency.run(f"{request.url.path}:{request_id}", body_hash(await request.body()),
                                            start)
            except IdempotencyConflict as err:
                raise HTTPException(409, str(err)) from None
            waiter: Any = asyncio.shield(task)  # a timed-out attempt leaves the answer for its retry
        else:
            waiter = start()  # cancelled on timeout or disconnect: its queued items are dropped unrun
        work = asyncio.ensure_future(waiter)
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            done, _ = await asyncio.wait({work, gone}, timeout=self.config.timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if work not in done:
            work.cancel()  # the client left or time ran out; an idempotent task lives on (shielded) for a retry
            if gone in done:
                raise HTTPException(499, "the client closed the connection; its queued work was cancelled")
            raise HTTPException(408, f"not answered within {self.config.timeout_s:g} s; retry (with the same "
                                     "request id to reuse the work already done)")
        try:
            return work.result()
        except (HTTPException, QueueFull, BatcherClosed, NotImplementedError):
            raise
        except Exception as err:  # the scorer failed on the batch: answer 500 and keep the connection
            log.exception("the judge failed on a batch")
            raise HTTPException(500, redact(f"the judge failed on this request's batch: {type(err).__name__}: "
                                            f"{err}")) from None


async def _disconnected(request: Request) -> None:
    """Return when the client has closed the connection (the body has been read by now)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


_SERVER_PATHS = sorted({str(p) for p in (Path(__file__).resolve().parents[2], Path(sys.prefix), Path(sys.base_prefix),
                                         Path.cwd(), Path.home()) if len(str(p)) > 1}, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` without the server's own paths (install folder, Python prefix, working and home folders):
    an error body tells a client what was wrong with its request, not where the server lives."""
    for path in _SERVER_PATHS:
        text = text.replace(path, "…")
    return text


def create_app(scorer: Scorer, config: ServeConfig | None = None) -> Any:
    """The ASGI app (FastAPI wrapped in the auth/size/metrics guard) serving `scorer`."""
    config = config or ServeConfig()
    metrics = ServeMetrics()
    service = _Service(scorer, config, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        service.batcher.start()
        yield
        await service.batcher.close()  # uvicorn has finished the in-flight requests by now; drain the rest
        service.prep_pool.shutdown(wait=True)

    app = FastAPI(title="patarm serve", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    _add_error_handlers(app)
    _add_routes(app, service)
    return Guard(app, metrics=metrics, token=config.token, max_body_bytes=config.max_body_bytes,
                 body_timeout_s=config.timeout_s)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes each bad input back, and a non-finite float (1e999 → inf) cannot be
        # rendered as JSON: that 422 became a 500. Say where and what, without the input.
        return JSONResponse({"detail": [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""),
                                         "type": e.get("type", "")} for e in err.errors()]}, 422)

    @app.exception_handler(QueueFull)
    async def queue_full(request: Request, err: QueueFull) -> JSONResponse:
        return JSONResponse({"detail": str(err)}, 429, headers={"Retry-After": str(err.retry_after_s)})

    @app.exception_handler(Exception)
    async def failed(request: Request, err: Exception) -> JSONResponse:  # a bug: uvicorn logs the traceback
        return JSONResponse({"detail": redact(f"internal error: {type(err).__name__}: {err}")}, 500)

    @app.exception_handler(BatcherClosed)
    async def closed(request: Request, err: BatcherClosed) -> JSONResponse:
        return JSONResponse({"detail": str(err)}, 503, headers={"Retry-After": "1"})


def _add_routes(app: FastAPI, service: _Service) -> None:
    config, batcher = service.config, service.batcher

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "model": config.model_name, "queue_depth": batcher.depth,
                "max_queue": config.max_queue, "max_batch": config.max_batch}

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    @app.post("/v1/judge", response_model=JudgeResponse)
    async def judge(body: JudgeRequest, request: Request, response: Response) -> JudgeResponse:
        service.check_items(len(body.items), sum(i.n for i in body.items))
        request_id = service.request_id(request, body.request_id)
        prepared = await service.prepare([_to_item(i) for i in body.items])

        async def start() -> list[ScoreResult]:
            return await batcher.submit(JUDGE_KEY, prepared, [i.n for i in body.items])

        results = await service.execute(request, request_id, start)
        if request_id:
            response.headers["X-Request-Id"] = request_id
        return JudgeResponse(request_id=request_id, model=config.model_name, results=[
            JudgeResult(id=item.id, scores=r.scores, mean=r.mean, judgments=[_judgment_out(j) for j in r.judgments])
            for item, r in zip(body.items, results)])

    @app.post("/get_reward", response_model=RewardResponse)
    async def get_reward(body: RewardRequest, request: Request) -> RewardResponse:
        service.check_items(len(body.query))
        if body.prompts is not None and len(body.prompts) != len(body.query):
            raise HTTPException(400, f"{len(body.query)} queries but {len(body.prompts)} prompts")

        def split_all() -> list[ScoreItem]:
            items = []
            for i, query in enumerate(body.query):
                try:
                    conversation, response_text = split_query(query, body.prompts[i] if body.prompts else None,
                                                              index=i)
                except ValueError as err:
                    raise HTTPException(400, str(err)) from None
                items.append(ScoreItem(conversation, response_text))
            return items

        prepared = await service.prepare(await service.off_loop(split_all), "query")

        async def start() -> list[ScoreResult]:
            return await batcher.submit(JUDGE_KEY, prepared)

        results = await service.execute(request, service.request_id(request), start)
        lo, hi = service.scorer.score_range
        invalid = lo if config.invalid_reward is None else config.invalid_reward
        rewards = [r.mean if r.mean is not None else invalid for r in results]
        return RewardResponse(rewards=rewards, scores=[min(max((x - lo) / (hi - lo), 0.0), 1.0) for x in rewards],
                              extra_logs={"judge_valid": [float(r.mean is not None) for r in results]})

    @app.post("/v1/chat/completions")
    async def chat(body: ChatRequest, request: Request) -> dict:
        if body.stream:
            raise HTTPException(400, "streaming is not supported; send stream=false")
        max_tokens = body.max_completion_tokens or body.max_tokens or config.max_chat_tokens
        if max_tokens > config.max_chat_tokens:
            raise HTTPException(400, f"max_tokens {max_tokens} is over this server's limit {config.max_chat_tokens}")
        sampling = Sampling(max_tokens=max_tokens, temperature=body.temperature, top_p=body.top_p, n=body.n)
        service.check_items(1, body.n)
        try:
            messages = await service.off_loop(service.scorer.prepare_chat, [m.model_dump() for m in body.messages],
                                              sampling)
        except PromptTooLong as err:
            raise HTTPException(413, str(err)) from None

        async def start() -> list[list[str]]:
            return await batcher.submit(("chat", sampling), [messages], [body.n])

        try:
            (texts,) = await service.execute(request, service.request_id(request), start)
        except NotImplementedError as err:
            raise HTTPException(501, str(err)) from None
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": config.model_name,
                "choices": [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop",
                             "logprobs": None} for i, t in enumerate(texts)]}
