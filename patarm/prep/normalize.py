"""`patarm prep normalize`: load, validate and normalise one source into DIR/pairs.jsonl + manifest.json.

Sources are whatever `patarm.data.load_pairs` reads (jsonl / json / parquet files, hub ids; the TRL
layouts, Skywork / UltraFeedback-binarized, sharegpt, LLaMA-Factory messages), plus the HelpSteer
sets through `convert=` and arbitrary column names through `columns=`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from tqdm.auto import tqdm

from patarm.data import DataError, LoadResult, Manifest, load_pairs, open_source
from patarm.prep.convert import CONVERTERS, Drop, rename_columns
from patarm.prep.io import PAIRS_FILE, Timer, describe_input, write_manifest, write_rows

# Converter drops that are the data's own verdict (a tie), not a malformed row: never an error.
FILTER_REASONS = frozenset({"tie"})


@dataclass
class NormalizeConfig:
    """What `normalize` reads and how. Every field is also a `patarm prep normalize` flag."""

    input: str = field(metadata={"help": "a .jsonl/.json/.parquet file or a hub dataset id owner/name"})
    format: str = field(default="auto", metadata={"help": "row layout: auto or a patarm.data.FORMATS name"})
    on_error: str = field(default="raise", metadata={"help": "raise: stop at the first bad row; skip: count it",
                                                     "choices": ("raise", "skip")})
    split: str = field(default="train", metadata={"help": "split of a hub dataset"})
    limit: int | None = field(default=None, metadata={"help": "stop after this many kept pairs"})
    source_name: str | None = field(default=None, metadata={"help": "`source` of rows without one"})
    domain: str | None = field(default=None, metadata={"help": "`domain` of rows without one"})
    convert: str | None = field(default=None, metadata={"help": f"raw-row converter: {sorted(CONVERTERS)}"})
    columns: dict[str, str] | None = field(default=None, metadata={"help": "canonical name -> source column"})

    def input_paths(self) -> list[str]:
        return [self.input]


def _transformed(rows: Iterator, cfg: NormalizeConfig, path: str, drops: Manifest) -> Iterator:
    """Raw rows through the column renaming and the converter; converter drops go to `drops`."""
    stream: Any = rows
    if cfg.columns:
        stream = enumerate(rename_columns(stream, cfg.columns))
    if cfg.convert:
        if cfg.convert not in CONVERTERS:
            raise ValueError(f"unknown converter {cfg.convert!r}; expected one of {sorted(CONVERTERS)}")
        stream = enumerate(CONVERTERS[cfg.convert](stream))
    for _, row in tqdm(stream, desc=f"normalize {Path(path).name}", unit="row", mininterval=1.0):
        if isinstance(row, Drop):
            if cfg.on_error == "raise" and row.reason not in FILTER_REASONS:
                raise DataError(path, None, None, row.reason, row.message)
            drops.drop(row.reason, f"{path}: {row.message}")
            continue
        yield row


def _load_transformed(cfg: NormalizeConfig) -> LoadResult:
    """load_pairs over converted rows; errors name the real file, not load_pairs' <memory>."""
    rows, path, name, _ = open_source(cfg.input, cfg.split)
    drops = Manifest()
    try:
        result = load_pairs(_transformed(rows, cfg, path, drops), format=cfg.format, on_error=cfg.on_error,
                            source_name=cfg.source_name or name, domain=cfg.domain, limit=cfg.limit)
    except DataError as err:
        err.path = path
        err.args = (str(err).replace("<memory>", path, 1),)
        raise
    result.manifest.rows_in += sum(drops.dropped.values())
    result.manifest.dropped.update(drops.dropped)
    for reason, message in drops.examples.items():
        result.manifest.examples.setdefault(reason, message)
    result.manifest.examples = {k: v.replace("<memory>", path, 1) for k, v in result.manifest.examples.items()}
    result.manifest.extra["source"] = path
    return result


def load_source(cfg: NormalizeConfig) -> LoadResult:
    """The validated pairs of one source and the manifest accounting for its rows."""
    if cfg.convert or cfg.columns:
        return _load_transformed(cfg)
    return load_pairs(cfg.input, format=cfg.format, on_error=cfg.on_error, split=cfg.split,
                      source_name=cfg.source_name, domain=cfg.domain, limit=cfg.limit)


def normalize(cfg: NormalizeConfig, output_dir: str | os.PathLike, record: dict | None = None) -> dict[str, Any]:
    """Write `output_dir/pairs.jsonl` and `manifest.json`; returns the manifest as a dict.
    `record` is the config stored in the manifest (default: `cfg` itself)."""
    timer = Timer()
    with timer.phase("load"):
        result = load_source(cfg)
    with timer.phase("write"):
        write_rows(result.pairs, Path(output_dir) / PAIRS_FILE)
    return write_manifest(output_dir, result.manifest, step="normalize", config=record or asdict(cfg),
                          inputs=[describe_input(cfg.input)], outputs=[PAIRS_FILE], timer=timer)
