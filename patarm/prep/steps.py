"""The prep steps as (config dataclass, runner) pairs; `patarm prep <step>` and `patarm prep run` use them.

A runner reads its input(s), does one thing, and writes its dataset(s) plus `manifest.json` into
`out_dir`:

    normalize  -> pairs.jsonl             one source, validated
    mix        -> pairs.jsonl             several sources, capped and filtered
    dedup      -> pairs.jsonl             exact and near duplicates removed
    noise      -> pairs.jsonl             a seeded fraction of labels flipped
    classify   -> pairs.jsonl             `domain` set
    pointwise  -> pairs.jsonl, sft.jsonl  pairs with teacher margin > min_margin; 2 SFT rows per pair
    pairwise   -> pairs.jsonl, sft.jsonl  pairs whose teacher decision agrees with the label
    rl         -> pairs.jsonl             pairs with a correct rate in [low, high] (what `patarm grpo` reads)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from patarm.config import import_object
from patarm.data import Manifest, PreferencePair
from patarm.judge import load_template
from patarm.prep.classify import classify_pairs
from patarm.prep.corpus import pairwise_corpus, pointwise_corpus, rl_set
from patarm.prep.dedup import dedup_pairs
from patarm.prep.io import PAIRS_FILE, Timer, describe_input, pairs_path, read_pairs, write_manifest, write_rows
from patarm.prep.mix import excluded_ids, flip_labels, mix_pairs, source_spec
from patarm.prep.normalize import NormalizeConfig, normalize


def _help(text: str, default: Any = None, path: bool = False, **kwargs: Any) -> Any:
    """A documented field; `path`: an input path, read relative to a config file that sets it."""
    metadata = {"help": text, **({"path": "input"} if path else {})}
    if "default_factory" in kwargs:
        return field(metadata=metadata, **kwargs)
    return field(default=default, metadata=metadata)


@dataclass
class MixConfig:
    sources: list = _help("paths / hub ids, or mappings {path, cap, name, domain, layout, layout_options, "
                          "split, columns, on_error}", path=True, default_factory=list)
    drop_sources: list = _help("`source` values to drop (the paper: magpie_ultra)", default_factory=list)
    exclude: list = _help("step dirs / pairs files whose pair ids are left out", path=True, default_factory=list)
    seed: int = _help("seed of the per-source cap sample and the shuffle", 0)
    shuffle: bool = _help("shuffle the mixed pairs", False)

    def input_paths(self) -> list[str]:
        return [str(pairs_path(source_spec(s).path)) for s in self.sources] + [str(pairs_path(p)) for p in self.exclude]


@dataclass
class _OneInput:
    input: str = _help("a step directory or a pairs.jsonl", "", path=True)

    def input_paths(self) -> list[str]:
        return [str(pairs_path(self.input))]


@dataclass
class DedupConfig(_OneInput):
    key: str = _help("pair: prompt + both responses; prompt: one pair per prompt", "pair")
    near: bool = _help("also remove near duplicates (MinHash)", True)
    threshold: float = _help("estimated Jaccard similarity at which a pair is a near duplicate", 0.85)
    num_perm: int = _help("MinHash permutations", 64)
    bands: int = _help("LSH bands (num_perm must be a multiple)", 16)
    ngram: int = _help("words per shingle", 5)


@dataclass
class NoiseConfig(_OneInput):
    fraction: float = _help("share of pairs whose label is flipped", 0.1)
    seed: int = _help("which pairs are flipped", 0)


@dataclass
class ClassifyConfig(_OneInput):
    method: str = _help("teacher (LLM, heuristic fallback) or heuristic", "heuristic")
    prompt: str = _help("classification prompt: a name under patarm/prep/prompts/ or a YAML path", "classify")
    keep_existing: bool = _help("leave pairs that already have a domain unchanged", False)
    seed: int | None = _help("teacher sampling seed", None)


@dataclass
class PointwiseConfig(_OneInput):
    template: str = _help("judge template name or YAML path", "pointwise")
    rubric_mode: str | None = _help("primary / generated / adaptive (default: the template's)", None)
    min_margin: float = _help("keep pairs whose teacher score margin is > this (the paper: 2)", 2.0)
    seed: int | None = _help("teacher sampling seed", None)


@dataclass
class PairwiseConfig(_OneInput):
    template: str = _help("judge template name or YAML path", "pairwise")
    rubric_mode: str | None = _help("primary / generated / adaptive (default: the template's)", None)
    swap_every: int = _help("show every k-th pair with chosen as B (against position bias)", 2)
    intersect_with: str | None = _help(
        "keep only pairs also in this step's pairs (the pointwise subset)", None, path=True
    )
    seed: int | None = _help("teacher sampling seed", None)

    def input_paths(self) -> list[str]:
        return super().input_paths() + ([str(pairs_path(self.intersect_with))] if self.intersect_with else [])


@dataclass
class RLConfig(_OneInput):
    template: str = _help("judge template name or YAML path", "pointwise")
    rubric_mode: str | None = _help("primary / generated / adaptive (default: the template's)", None)
    n: int = _help("rollouts per response (the paper: 8)", 8)
    low: float = _help("lowest kept correct rate (the paper: 1/8)", 0.125)
    high: float = _help("highest kept correct rate (the paper: 6/8)", 0.75)
    seed: int | None = _help("rollout sampling seed", None)
    keep_rewards: list = _help("GRPO's other reward functions ('module:function'): a pair outside [low, high] is "
                               "still kept where they score one side's rollouts unequally", default_factory=list)


def _finish(out_dir, manifest: Manifest, step: str, cfg: Any, record: dict | None, outputs: dict[str, list],
            timer: Timer, teacher: Any = None) -> dict[str, Any]:
    with timer.phase("write"):
        for name, rows in outputs.items():
            write_rows(rows, Path(out_dir) / name)
    if teacher is not None and hasattr(teacher, "summary"):
        manifest.extra["teacher_stats"] = teacher.summary()
    return write_manifest(out_dir, manifest, step=step, config=record or asdict(cfg),
                          inputs=[describe_input(p) for p in cfg.input_paths()], outputs=list(outputs), timer=timer)


def _read_unique(path: str, timer: Timer) -> list[PreferencePair]:
    """A step's input pairs; teacher steps join judgments back by id, so ids must be unique."""
    with timer.phase("load"):
        pairs = read_pairs(path)
    dupes = [k for k, v in Counter(p.id for p in pairs).items() if v > 1]
    if dupes:
        raise ValueError(f"{pairs_path(path)}: {len(dupes)} pair ids occur more than once (e.g. {dupes[0]!r}); "
                         "run the dedup step first, which drops repeated ids")
    return pairs


def _need(teacher: Any, step: str) -> Any:
    if teacher is None:
        raise ValueError(f"the {step} step needs a teacher (--teacher, or `teacher:` in the pipeline config)")
    return teacher


def run_normalize(cfg: NormalizeConfig, out_dir, teacher=None, record=None) -> dict:
    return normalize(cfg, out_dir, record)


def run_mix(cfg: MixConfig, out_dir, teacher=None, record=None) -> dict:
    timer = Timer()
    with timer.phase("load"):
        exclude = excluded_ids(cfg.exclude)
        pairs, manifest = mix_pairs([source_spec(s) for s in cfg.sources], cfg.drop_sources, exclude, cfg.seed,
                                    cfg.shuffle)
    return _finish(out_dir, manifest, "mix", cfg, record, {PAIRS_FILE: pairs}, timer)


def run_dedup(cfg: DedupConfig, out_dir, teacher=None, record=None) -> dict:
    timer = Timer()
    with timer.phase("load"):
        pairs = read_pairs(cfg.input)
    with timer.phase("dedup"):
        kept, manifest = dedup_pairs(pairs, cfg.key, cfg.near, cfg.threshold, cfg.num_perm, cfg.bands, cfg.ngram)
    return _finish(out_dir, manifest, "dedup", cfg, record, {PAIRS_FILE: kept}, timer)


def run_noise(cfg: NoiseConfig, out_dir, teacher=None, record=None) -> dict:
    timer = Timer()
    pairs, manifest = flip_labels(read_pairs(cfg.input), cfg.fraction, cfg.seed)
    return _finish(out_dir, manifest, "noise", cfg, record, {PAIRS_FILE: pairs}, timer)


def run_classify(cfg: ClassifyConfig, out_dir, teacher=None, record=None) -> dict:
    if cfg.method not in ("teacher", "heuristic"):
        raise ValueError(f"classify method must be 'teacher' or 'heuristic', got {cfg.method!r}")
    timer = Timer()
    pairs = _read_unique(cfg.input, timer)
    with timer.phase("classify"):
        out, manifest = classify_pairs(pairs, _need(teacher, "classify") if cfg.method == "teacher" else None,
                                       cfg.prompt, cfg.keep_existing, cfg.seed)
    return _finish(out_dir, manifest, "classify", cfg, record, {PAIRS_FILE: out}, timer, teacher)


def run_pointwise(cfg: PointwiseConfig, out_dir, teacher=None, record=None) -> dict:
    timer = Timer()
    pairs = _read_unique(cfg.input, timer)
    with timer.phase("teacher"):
        rows, manifest = pointwise_corpus(pairs, _need(teacher, "pointwise"),
                                          load_template(cfg.template, rubric_mode=cfg.rubric_mode),
                                          cfg.min_margin, cfg.seed)
    kept_ids = {r["pair_id"] for r in rows}
    kept = [p for p in pairs if p.id in kept_ids]
    return _finish(out_dir, manifest, "pointwise", cfg, record, {PAIRS_FILE: kept, "sft.jsonl": rows}, timer,
                   teacher)


def run_pairwise(cfg: PairwiseConfig, out_dir, teacher=None, record=None) -> dict:
    timer = Timer()
    pairs = _read_unique(cfg.input, timer)
    with timer.phase("teacher"):
        rows, manifest = pairwise_corpus(pairs, _need(teacher, "pairwise"),
                                         load_template(cfg.template, rubric_mode=cfg.rubric_mode), cfg.seed,
                                         cfg.swap_every)
    if cfg.intersect_with:
        subset = {p.id for p in read_pairs(cfg.intersect_with)}
        manifest.extra["agreeing_before_intersection"] = len(rows)
        for row in rows:
            if row["pair_id"] not in subset:
                manifest.drop("not_in_intersection", f"pair {row['pair_id']} is not in {cfg.intersect_with}")
        rows = [r for r in rows if r["pair_id"] in subset]
        manifest.rows_out = len(rows)
    kept_ids = {r["pair_id"] for r in rows}
    kept = [p for p in pairs if p.id in kept_ids]
    return _finish(out_dir, manifest, "pairwise", cfg, record, {PAIRS_FILE: kept, "sft.jsonl": rows}, timer,
                   teacher)


def run_rl(cfg: RLConfig, out_dir, teacher=None, record=None) -> dict:
    timer = Timer()
    pairs = _read_unique(cfg.input, timer)
    template = load_template(cfg.template, rubric_mode=cfg.rubric_mode)
    with timer.phase("teacher"):
        kept, manifest = rl_set(pairs, _need(teacher, "rl"), template, cfg.n, cfg.low, cfg.high, cfg.seed,
                                keep_rewards=[import_object(s, "keep_rewards entry") for s in cfg.keep_rewards])
    return _finish(out_dir, manifest, "rl", cfg, record, {PAIRS_FILE: kept}, timer, teacher)


# step -> (config class, runner, whether it can use a teacher)
STEPS: dict[str, tuple[type, Callable, bool]] = {
    "normalize": (NormalizeConfig, run_normalize, False),
    "mix": (MixConfig, run_mix, False),
    "dedup": (DedupConfig, run_dedup, False),
    "noise": (NoiseConfig, run_noise, False),
    "classify": (ClassifyConfig, run_classify, True),
    "pointwise": (PointwiseConfig, run_pointwise, True),
    "pairwise": (PairwiseConfig, run_pairwise, True),
    "rl": (RLConfig, run_rl, True),
}
