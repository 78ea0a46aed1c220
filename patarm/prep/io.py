"""Step outputs: atomic JSON-lines files, content hashes, and the manifest every prep step writes.

A step directory holds its dataset(s) (`pairs.jsonl`, and `sft.jsonl` for the corpus steps) plus
`manifest.json`: rows in/out, dropped by reason, the step's config, the sha256 of every input and
output file, and timings in seconds. A step whose manifest matches its config and input hashes is
complete, which is what makes `patarm prep run` resumable.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from patarm.data import Manifest, PreferencePair, load_pairs
from patarm.io import sha256_file, write_json, write_jsonl

PAIRS_FILE = "pairs.jsonl"
MANIFEST_FILE = "manifest.json"


def config_hash(config: dict[str, Any]) -> str:
    """sha256 of a config mapping's canonical JSON (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def describe_input(source: Any) -> dict[str, Any]:
    """What a step read: a file's path and sha256, or a hub id (the hub pins no content hash)."""
    if isinstance(source, (str, os.PathLike)) and Path(source).is_file():
        return {"path": str(source), "sha256": sha256_file(source)}
    if isinstance(source, (str, os.PathLike)):
        return {"hub_id": str(source), "sha256": None}
    return {"path": "<memory>", "sha256": None}


def _row(row: PreferencePair | dict) -> dict[str, Any]:
    """A pair as its canonical row without dataclasses.asdict's deep copy (5x faster; the row is
    serialised at once, so sharing the pair's lists is safe)."""
    if not isinstance(row, PreferencePair):
        return row
    return {"id": row.id, "prompt": row.prompt, "chosen": row.chosen, "rejected": row.rejected,
            "domain": row.domain, "source": row.source, "metadata": row.metadata}


def write_rows(rows: Iterable[PreferencePair | dict], path: str | os.PathLike) -> int:
    """Write a step's rows (pairs or dicts) as JSON lines, atomically; returns the row count."""
    return write_jsonl(rows, path, convert=_row)


def pairs_path(source: str | os.PathLike) -> Path:
    """A step directory's pairs.jsonl, or the path itself when it is a file."""
    path = Path(source)
    return path / PAIRS_FILE if path.is_dir() else path


def read_pairs(source: str | os.PathLike, allow_empty: bool = False) -> list[PreferencePair]:
    """The pairs of a previous step (its directory or a pairs.jsonl), validated on the way in. No pairs at
    all is an error (an upstream step kept nothing, or the wrong folder was named) unless `allow_empty`."""
    path = pairs_path(source)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: name a previous step's folder or a pairs.jsonl file")
    pairs = load_pairs(path, format="canonical", on_error="raise").pairs
    if not pairs and not allow_empty:
        raise ValueError(f"{path} holds no pairs: the step that wrote it kept nothing (see its manifest.json), "
                         "or this is the wrong input")
    return pairs


class Timer:
    """Named wall-clock phases in seconds, e.g. {"load_s": 0.21, "write_s": 0.05, "total_s": 0.3}."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.phases[f"{name}_s"] = round(self.phases.get(f"{name}_s", 0.0) + time.perf_counter() - t0, 4)

    def summary(self) -> dict[str, float]:
        return {**self.phases, "total_s": round(time.perf_counter() - self.start, 4)}


def write_manifest(out_dir: str | os.PathLike, manifest: Manifest, *, step: str, config: dict[str, Any],
                   inputs: list[dict[str, Any]], outputs: list[str], timer: Timer) -> dict[str, Any]:
    """Write `out_dir/manifest.json` (atomically, last, so its presence means the step finished).

    Raises if the manifest does not add up (rows_in != rows_out + sum(dropped)): a row was lost.
    """
    if not manifest.consistent:
        raise RuntimeError(f"{step}: rows_in {manifest.rows_in} != rows_out {manifest.rows_out} + dropped "
                           f"{sum(manifest.dropped.values())} {dict(manifest.dropped)}; a row was not accounted for")
    out_dir = Path(out_dir)
    data = manifest.to_dict()
    data.update(step=step, config=config, config_sha256=config_hash(config), inputs=inputs,
                outputs={name: sha256_file(out_dir / name) for name in outputs}, timings=timer.summary())
    write_json(data, out_dir / MANIFEST_FILE)
    return data


def read_manifest(out_dir: str | os.PathLike) -> dict[str, Any] | None:
    path = Path(out_dir) / MANIFEST_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def step_is_done(out_dir: str | os.PathLike, config: dict[str, Any], inputs: list[dict[str, Any]]) -> bool:
    """Whether `out_dir` already holds this step's result for this config and these exact inputs."""
    data = read_manifest(out_dir)
    if data is None or data.get("config_sha256") != config_hash(config):
        return False
    if [i.get("sha256") for i in data.get("inputs", [])] != [i.get("sha256") for i in inputs]:
        return False
    if any(i.get("sha256") is None for i in inputs):  # a hub input has no hash: cannot prove it is unchanged
        return False
    out_dir = Path(out_dir)
    return all((out_dir / name).is_file() and sha256_file(out_dir / name) == digest
               for name, digest in data.get("outputs", {}).items())
