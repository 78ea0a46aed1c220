"""Mixing sources (per-source caps, source filters, exclusions) and seeded label noise.

The paper's mix: Code-Preference, Math-Step-DPO-10K and Skywork subsets, with every `magpie_ultra`
pair dropped (RM-R1 found it spuriously correlated). Label noise flips a seeded fraction of pairs
for the §5.1 robustness ablation.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from patarm.data import Manifest, PreferencePair
from patarm.prep.io import pairs_path, read_pairs
from patarm.prep.normalize import NormalizeConfig, load_source


@dataclass
class SourceSpec:
    """One mix source: a file, a hub id or a previous step's directory, plus how to read it."""

    path: str = field(metadata={"help": "file, hub id owner/name, or a step directory"})
    cap: int | None = field(default=None, metadata={"help": "keep at most this many pairs (seeded sample)"})
    name: str | None = field(default=None, metadata={"help": "`source` of rows without one"})
    domain: str | None = field(default=None, metadata={"help": "`domain` of rows without one"})
    layout: str = "auto"
    layout_options: dict[str, Any] | None = None
    split: str = "train"
    columns: dict[str, str] | None = None
    on_error: str = "raise"

    def load(self):
        """The source's pairs and the manifest of its loading."""
        return load_source(NormalizeConfig(input=str(pairs_path(self.path)), layout=self.layout,
                                           layout_options=self.layout_options, on_error=self.on_error,
                                           split=self.split, source_name=self.name, domain=self.domain,
                                           columns=self.columns))


def source_spec(value: str | dict[str, Any]) -> SourceSpec:
    """A SourceSpec from a path string or a mapping (unknown keys are an error naming them)."""
    if isinstance(value, str):
        return SourceSpec(path=value)
    unknown = set(value) - {f.name for f in fields(SourceSpec)}
    if unknown:
        raise ValueError(f"mix source {value.get('path')!r}: unknown keys {sorted(unknown)}")
    return SourceSpec(**value)


def _capped(pairs: list[PreferencePair], cap: int | None, rng: random.Random) -> tuple[list[PreferencePair], int]:
    """At most `cap` pairs, a seeded sample kept in input order; returns (kept, how many were cut)."""
    if cap is None or len(pairs) <= cap:
        return pairs, 0
    chosen = set(rng.sample(range(len(pairs)), cap))
    return [p for i, p in enumerate(pairs) if i in chosen], len(pairs) - cap


def mix_pairs(sources: Sequence[SourceSpec], drop_sources: Sequence[str] = (), exclude_ids: set[str] = frozenset(),
              seed: int = 0, shuffle: bool = False) -> tuple[list[PreferencePair], Manifest]:
    """Load every source, drop filtered sources and excluded ids, cap each source, concatenate.

    `drop_sources` matches a pair's `source` case-insensitively. Every dropped row is counted:
    the loaders' own reasons, `source_filtered`, `excluded`, `over_cap`.
    """
    manifest, out, per_source = Manifest(), [], {}
    rng = random.Random(seed)
    dropped_names = {s.lower() for s in drop_sources}
    for spec in sources:
        result = spec.load()
        manifest.rows_in += result.manifest.rows_in
        manifest.dropped.update(result.manifest.dropped)
        for reason, message in result.manifest.examples.items():
            manifest.examples.setdefault(reason, message)
        kept = []
        for pair in result.pairs:
            if (pair.source or "").lower() in dropped_names:
                manifest.drop("source_filtered", f"{spec.path}: pair {pair.id} has source {pair.source!r}")
            elif pair.id in exclude_ids:
                manifest.drop("excluded", f"{spec.path}: pair {pair.id} is in an excluded set")
            else:
                kept.append(pair)
        kept, cut = _capped(kept, spec.cap, rng)
        for _ in range(cut):
            manifest.drop("over_cap", f"{spec.path}: cap {spec.cap}")
        per_source[spec.path] = {"rows_in": result.manifest.rows_in, "kept": len(kept),
                                 "sources": dict(Counter(p.source for p in kept))}
        out.extend(kept)
    if shuffle:
        rng.shuffle(out)
    manifest.rows_out = len(out)
    manifest.extra["per_source"] = per_source
    return out, manifest


def excluded_ids(paths: Sequence[str]) -> set[str]:
    """Pair ids of the given step directories / pairs files (e.g. the RL set, kept out of SFT)."""
    return {p.id for path in paths for p in read_pairs(path)}


def flip_labels(pairs: Sequence[PreferencePair], fraction: float,
                seed: int = 0) -> tuple[list[PreferencePair], Manifest]:
    """Swap chosen and rejected on round(fraction * n) pairs picked with `seed`; flipped pairs are
    marked metadata["label_flipped"] = True. No pair is dropped."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    flip = set(random.Random(seed).sample(range(len(pairs)), round(fraction * len(pairs))))
    out = []
    for i, p in enumerate(pairs):
        if i in flip:
            p = PreferencePair(id=p.id, prompt=p.prompt, chosen=p.rejected, rejected=p.chosen, domain=p.domain,
                               source=p.source, metadata={**p.metadata, "label_flipped": True})
        out.append(p)
    manifest = Manifest(rows_in=len(pairs), rows_out=len(out))
    manifest.extra.update(flipped=len(flip), fraction=fraction, seed=seed)
    return out, manifest
