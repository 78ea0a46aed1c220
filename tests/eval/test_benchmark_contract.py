"""The benchmark contract is code (`patarm.eval.registry.Benchmark`), checked when the registry is imported, and
ARCHITECTURE.md's "where a new thing goes" row lists exactly its functions."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

from patarm.eval import registry

ROOT = Path(__file__).resolve().parents[2]


def _copy_of(module: types.ModuleType, **changes) -> types.ModuleType:
    fake = types.ModuleType("fake_benchmark")
    fake.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")}, **changes)
    return fake


def test_every_registered_benchmark_keeps_the_contract():
    for name, module in registry.BENCHMARKS.items():
        assert registry.check_benchmark(name, module) is module
        assert all(callable(getattr(module, f)) for f in registry.FUNCTIONS)


@pytest.mark.parametrize("missing", registry.FUNCTIONS)
def test_a_module_without_a_function_is_refused_by_name(missing):
    fake = _copy_of(registry.BENCHMARKS["rmbench"])
    delattr(fake, missing)
    with pytest.raises(TypeError, match=rf"benchmark 'rmbench' \(fake_benchmark\) lacks {missing}\(\)"):
        registry.check_benchmark("rmbench", fake)


def test_a_function_with_other_arguments_is_refused():
    fake = _copy_of(registry.BENCHMARKS["judgebench"], score=lambda records: {})  # no tie_policy
    with pytest.raises(
        TypeError, match=r"score\(records\) does not take the contract's arguments \(records, tie_policy\)"
    ):
        registry.check_benchmark("judgebench", fake)
    fake = _copy_of(registry.BENCHMARKS["judgebench"], NAME="other")
    with pytest.raises(TypeError, match="NAME must be 'judgebench'"):
        registry.check_benchmark("judgebench", fake)


def test_architecture_lists_the_contract():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| benchmark |"))
    listed = re.findall(r"`(\w+)`", row.split("|")[2])
    assert sorted(listed) == sorted(registry.FUNCTIONS), "ARCHITECTURE.md's benchmark row and registry.Benchmark differ"
