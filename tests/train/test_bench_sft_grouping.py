"""bench/sft_length_grouping.py: its padding arithmetic, its bad-row messages, and a run at its smallest size."""

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.sft_length_grouping import read_rows, useful_share  # noqa: E402


def test_grouping_groups_nothing_at_32_rows_and_pads_less_on_a_corpus():
    """transformers' sampler sorts mega-batches of len // 32 batches: at 32 rows (bench/mfu.py's grouped mode) that is
    one batch, so the padding equals the random order's; on a corpus-sized set of varied lengths it falls."""
    rng = random.Random(0)
    lengths = [rng.randint(350, 610) for _ in range(32)]
    assert useful_share(lengths, "group_by_length") == useful_share(lengths, "random")
    lengths = [rng.randint(350, 610) for _ in range(896)]
    assert useful_share(lengths, "random") < 0.9 < 0.98 < useful_share(lengths, "group_by_length")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "sft_length_grouping.py"), *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})


def test_bad_rows_name_the_file_and_row(tmp_path, capsys):
    """The bench's reader, in this process (a subprocess per case cost ~8 s of imports each)."""
    corpus = tmp_path / "sft.jsonl"
    corpus.write_text('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\nnope\n')
    with pytest.raises(SystemExit) as stop:
        read_rows(corpus)
    assert stop.value.code == 2 and f"{corpus}: row 2: not a JSON object" in capsys.readouterr().err
    corpus.write_text('{"messages": "a"}\n')
    with pytest.raises(SystemExit) as stop:
        read_rows(corpus)
    assert stop.value.code == 2 and f"{corpus}: row 1: field 'messages'" in capsys.readouterr().err


def test_bench_runs_at_its_smallest_size(tmp_path):
    """A tiny judge on 40 rows of two very different lengths: the grouped order pads less, and the batches the
    trainer trained are the ones the bench picked (the bench exits otherwise)."""
    rows = [{"messages": [{"role": "user", "content": ("short prompt " if i % 2 else "a much longer prompt " * 12)
                           + str(i)},
                          {"role": "assistant", "content": f"<eval>x :: y</eval><score>{i % 9 + 1}</score>"}]}
            for i in range(40)]
    corpus = tmp_path / "sft.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = _run("--corpus", str(corpus), "--model", "tiny", "--steps", "2", "--threads", "1", "--max_length", "512")
    assert done.returncode == 0, done.stderr[-3000:]
    figures = dict(re.findall(r"^(\w+)=(\S+)$", done.stdout, re.M))
    assert float(figures["sft_group_speedup"]) > 0
    assert float(figures["useful_share_grouped"]) >= float(figures["useful_share_random"])
