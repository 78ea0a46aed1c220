"""Benchmark name → module. Each module offers `load(path | None) -> items`, `validate(record)`,
`score(records, tie_policy=None) -> metrics` (percent), `item_result(record)`, `headline(metrics)`,
`comparisons(item)` and `make_record(item, scores=..., decisions=...)`."""

from __future__ import annotations

from types import ModuleType

from patarm.config import nearest
from patarm.eval import judgebench, rewardbench, rewardbench2, rmbench

BENCHMARKS: dict[str, ModuleType] = {
    "rewardbench": rewardbench,
    "rewardbench2": rewardbench2,
    "rmbench": rmbench,
    "judgebench": judgebench,
}


def get(name: str) -> ModuleType:
    """The benchmark module called `name`; a clear error listing the known names otherwise."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ValueError(f"unknown benchmark {name!r}{nearest(name, BENCHMARKS)}; known: {sorted(BENCHMARKS)}") from None
