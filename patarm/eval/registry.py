"""Benchmark name → module, and the contract every benchmark module keeps (`Benchmark`), checked at import:
a module that lacks a function, or takes other arguments than the contract's, fails loudly here, not mid-run."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from patarm.config import nearest
from patarm.eval import judgebench, rewardbench, rewardbench2, rmbench


class Benchmark(Protocol):
    """What `patarm eval` calls on a benchmark module (a module may add `report_plots(records, out_dir,
    tie_policy, plt)` for plots of its own). Records use the benchmark's official field names."""

    NAME: str

    def load(self, path: str | Path | None = None) -> list[dict]:
        """Items ready to judge from local files, or from the hub when `path` is None."""

    def from_official(self, row: dict) -> dict:
        """A record from the benchmark's own output spelling (records pass unchanged)."""

    def validate(self, record: dict) -> None:
        """Raise `patarm.eval.records.RecordError` unless `record` is well formed."""

    def score(self, records: Sequence[dict], tie_policy: str | None = None) -> dict[str, Any]:
        """Metrics in percent, as the official code computes them."""

    def headline(self, metrics: dict[str, Any]) -> float | None:
        """The one number a leaderboard shows."""

    def item_result(self, record: dict, tie_policy: str | None = None) -> Any:
        """One record's credit (0-1, or None for records scored as a set)."""

    def comparisons(self, item: dict) -> list[tuple[int, int]]:
        """The candidate pairs a pairwise judge compares ([] for best-of-n from pointwise scores)."""

    def make_record(self, item: dict, scores: Sequence[float | None] | None = None, decisions: Any = None) -> dict:
        """A record from pointwise scores or pairwise decisions."""

    def report_bars(self, metrics: dict[str, Any]) -> dict[str, float]:
        """The numbers the report's bar chart shows."""

    def report_scores(self, records: Sequence[dict]) -> tuple[list, list]:
        """(scores of the better responses, scores of the others) for the report's histogram."""


FUNCTIONS = tuple(
    name for name, value in vars(Benchmark).items() if inspect.isfunction(value) and not name.startswith("_")
)


def check_benchmark(name: str, module: ModuleType) -> ModuleType:
    """`module` if it keeps the Benchmark contract; TypeError naming the module and what it lacks otherwise."""
    where = f"benchmark {name!r} ({module.__name__})"
    if getattr(module, "NAME", None) != name:
        raise TypeError(f"{where}: NAME must be {name!r}, got {getattr(module, 'NAME', None)!r}")
    for fn_name in FUNCTIONS:
        fn = getattr(module, fn_name, None)
        if not callable(fn):
            raise TypeError(f"{where} lacks {fn_name}(); every benchmark module defines {', '.join(FUNCTIONS)} "
                            "(patarm.eval.registry.Benchmark)")
        wanted = list(inspect.signature(getattr(Benchmark, fn_name)).parameters)[1:]  # without self
        params = inspect.signature(fn).parameters
        have = list(params)
        extra = [p for p in have[len(wanted):] if params[p].default is inspect.Parameter.empty
                 and params[p].kind not in (params[p].VAR_POSITIONAL, params[p].VAR_KEYWORD)]
        if have[:len(wanted)] != wanted or extra:
            raise TypeError(f"{where}: {fn_name}{inspect.signature(fn)} does not take the contract's arguments "
                            f"({', '.join(wanted)})")
    return module


BENCHMARKS: dict[str, ModuleType] = {name: check_benchmark(name, module) for name, module in {
    "rewardbench": rewardbench,
    "rewardbench2": rewardbench2,
    "rmbench": rmbench,
    "judgebench": judgebench,
}.items()}


def get(name: str) -> ModuleType:
    """The benchmark module called `name`; a clear error listing the known names otherwise."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ValueError(
            f"unknown benchmark {name!r}{nearest(name, BENCHMARKS)}; known: {sorted(BENCHMARKS)}"
        ) from None
