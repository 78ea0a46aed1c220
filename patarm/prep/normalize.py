"""`patarm prep normalize`: load, validate and normalise one source into DIR/pairs.jsonl + manifest.json.

Sources are whatever `patarm.data.load_pairs` reads (jsonl / json / parquet files, hub ids) in any layout
of the registry `patarm.data.LAYOUTS` (detected per row, or named with `layout`), with arbitrary column
names mapped through `columns`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from patarm.data import LoadResult, load_pairs
from patarm.data.layouts import layout_names
from patarm.prep.io import PAIRS_FILE, Timer, describe_input, write_manifest, write_rows


@dataclass
class NormalizeConfig:
    """What `normalize` reads and how. Every field is also a `patarm prep normalize` flag."""

    input: str = field(
        metadata={"path": "input", "help": "a .jsonl/.json/.parquet file or a hub dataset id owner/name"}
    )
    layout: str = field(default="auto", metadata={"help": f"row layout: {layout_names()}"})
    layout_options: dict[str, Any] | None = field(
        default=None, metadata={"help": 'the layout\'s options as JSON, e.g. {"axis": "safer"} (docs/data-layouts.md)'})
    on_error: str = field(default="raise", metadata={"help": "raise: stop at the first bad row; skip: count it",
                                                     "choices": ("raise", "skip")})
    split: str = field(default="train", metadata={"help": "split of a hub dataset"})
    limit: int | None = field(default=None, metadata={"help": "stop after this many kept pairs"})
    source_name: str | None = field(default=None, metadata={"help": "`source` of rows without one"})
    domain: str | None = field(default=None, metadata={"help": "`domain` of rows without one"})
    columns: dict[str, str] | None = field(default=None, metadata={"help": "layout field name -> source column"})
    allow_empty: bool = field(default=False, metadata={"help": "accept an input without rows (else an error)"})

    def input_paths(self) -> list[str]:
        return [self.input]


def load_source(cfg: NormalizeConfig) -> LoadResult:
    """The validated pairs of one source and the manifest accounting for its rows."""
    return load_pairs(cfg.input, layout=cfg.layout, layout_options=cfg.layout_options, columns=cfg.columns,
                      on_error=cfg.on_error, split=cfg.split, source_name=cfg.source_name, domain=cfg.domain,
                      limit=cfg.limit, progress=f"normalize {Path(str(cfg.input)).name}")


def normalize(cfg: NormalizeConfig, output_dir: str | os.PathLike, record: dict | None = None) -> dict[str, Any]:
    """Write `output_dir/pairs.jsonl` and `manifest.json`; returns the manifest as a dict.
    `record` is the config stored in the manifest (default: `cfg` itself)."""
    timer = Timer()
    with timer.phase("load"):
        result = load_source(cfg)
    if result.manifest.rows_in == 0 and not cfg.allow_empty:
        raise ValueError(f"{cfg.input}: no rows to normalize (an empty file or split); pass --allow_empty if that is "
                         "expected")
    with timer.phase("write"):
        write_rows(result.pairs, Path(output_dir) / PAIRS_FILE)
    return write_manifest(output_dir, result.manifest, step="normalize", config=record or asdict(cfg),
                          inputs=[describe_input(cfg.input)], outputs=[PAIRS_FILE], timer=timer)
