"""Math answer equivalence through the `math-verify` package (Hugging Face).

A solution's final answer is the text after its last answer marker (GSM8K solutions end with
``A: 18``); ``math_verify.verify(parse(gold), parse(answer))`` decides equivalence (numbers, LaTeX,
units and ``$`` signs are normalised by the package).

math-verify bounds its own run time with ``signal.alarm``, which only works in the main thread:
there the package's timeouts are used; in other threads they are switched off (callers bound time
themselves, e.g. with `verify_many`'s process pool).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache

ANSWER_MARKERS = ("A:", "####")
PARSE_TIMEOUT_S = 5  # per parse / verify call, main thread only


def final_answer(text: str, markers: Sequence[str] = ANSWER_MARKERS) -> str:
    """The text after the last answer marker (the whole text when there is none), stripped."""
    best = -1
    chosen = ""
    for marker in markers:
        pos = text.rfind(marker)
        if pos > best:
            best, chosen = pos, marker
    return (text[best + len(chosen):] if best >= 0 else text).strip()


def _timeouts() -> int | None:
    return PARSE_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


@lru_cache(maxsize=65536)
def parse_answer(answer: str) -> tuple:
    """math-verify's parse of an answer string (cached: pools repeat the same answers)."""
    from math_verify import parse

    return tuple(parse(answer, parsing_timeout=_timeouts()))


def answers_equal(gold: str, answer: str) -> bool:
    """Whether `answer` is mathematically equivalent to `gold` (both are plain answer strings)."""
    from math_verify import verify

    parsed_gold, parsed = parse_answer(gold), parse_answer(answer)
    if not parsed_gold or not parsed:
        return False
    return bool(verify(list(parsed_gold), list(parsed), timeout_seconds=_timeouts()))


def solution_correct(gold_solution: str, solution: str) -> bool:
    """Compare the final answers (after the last marker) of a reference and a model solution."""
    return answers_equal(final_answer(gold_solution), final_answer(solution))


def _verify_pair(pair: tuple[str, str]) -> bool:
    return solution_correct(*pair)


def verify_many(pairs: Iterable[tuple[str, str]], workers: int = 1) -> list[bool]:
    """`solution_correct` over (gold_solution, solution) pairs; `workers` > 1 uses processes
    (each worker's main thread keeps math-verify's time limits)."""
    pairs = list(pairs)
    if workers <= 1:
        return [_verify_pair(p) for p in pairs]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(_verify_pair, pairs, chunksize=64))


def load_math_rows(path: str) -> list[dict]:
    """(gold, answer) rows to check, from a JSON-lines file in either layout:

    - one answer per row: `{"gold", "answer" | "solution", "is_correct"?}`;
    - a best-of-N pool (GSM8K `example_model_solutions.jsonl`): `{"ground_truth" | "gold", <source>: {"solution",
      "is_correct"}, ...}`, one row per source.
    A row in neither layout is an error naming the file, the line and what is missing."""
    from patarm.io import DataError, iter_jsonl

    out = []
    for index, row in iter_jsonl(path):
        if isinstance(row, DataError):
            raise row
        gold = row.get("gold", row.get("ground_truth")) if isinstance(row, dict) else None
        if not isinstance(gold, str):
            raise DataError(path, index, "gold", "missing_field", "a math row needs the reference answer as 'gold' "
                            "(or 'ground_truth', as in the GSM8K pool)")
        sources = {k: v for k, v in row.items() if isinstance(v, dict) and isinstance(v.get("solution"), str)}
        if sources:
            out += [{"gold": gold, "answer": v["solution"], "is_correct": v.get("is_correct"), "source": k}
                    for k, v in sources.items()]
            continue
        answer = row.get("answer", row.get("solution"))
        if not isinstance(answer, str):
            raise DataError(path, index, "answer", "missing_field", "a math row needs 'answer' (or 'solution') text, "
                            "or per-source {solution, is_correct} objects")
        out.append({"gold": gold, "answer": answer, "is_correct": row.get("is_correct"), "source": None})
    if not out:
        raise ValueError(f"{path}: no rows to check")
    return out
