"""Step outputs: atomic JSON-lines files, content hashes, and the manifest every prep step writes.

A step directory holds its dataset(s) (`pairs.jsonl`, and e.g. `sft.jsonl` / `grpo.jsonl`) plus
`manifest.json`: rows in/out, dropped by reason, the step's config, the sha256 of every input and
output file, and timings in seconds. A step whose manifest matches its config and input hashes is
complete, which is what makes `patarm prep run` resumable.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from patarm.data import Manifest, PreferencePair, load_pairs
from patarm.data.loaders import atomic_write

PAIRS_FILE = "pairs.jsonl"
MANIFEST_FILE = "manifest.json"


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


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


_atomic_write = atomic_write  # one implementation, in patarm.data


def _pair_row(pair: PreferencePair) -> dict[str, Any]:
    """`PreferencePair.to_dict()` without dataclasses.asdict's deep copy (5x faster; the row is
    serialised at once, so sharing the pair's lists is safe)."""
    return {"id": pair.id, "prompt": pair.prompt, "chosen": pair.chosen, "rejected": pair.rejected,
            "domain": pair.domain, "source": pair.source, "metadata": pair.metadata}


def write_jsonl(rows: Iterable[PreferencePair | dict], path: str | os.PathLike) -> int:
    """Write rows (pairs or dicts) as JSON lines, atomically; returns the row count."""
    count = 0

    def write(fh) -> None:
        nonlocal count
        dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
        for row in rows:
            fh.write(dumps(_pair_row(row) if isinstance(row, PreferencePair) else row))
            fh.write("\n")
            count += 1

    _atomic_write(Path(path), write)
    return count


def read_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Rows of a JSON-lines file (blank lines skipped)."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def pairs_path(source: str | os.PathLike) -> Path:
    """A step directory's pairs.jsonl, or the path itself when it is a file."""
    path = Path(source)
    return path / PAIRS_FILE if path.is_dir() else path


def read_pairs(source: str | os.PathLike) -> list[PreferencePair]:
    """The pairs of a previous step (its directory or a pairs.jsonl), validated on the way in."""
    return load_pairs(pairs_path(source), format="canonical", on_error="raise").pairs


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
    _atomic_write(out_dir / MANIFEST_FILE, lambda fh: json.dump(data, fh, indent=2, sort_keys=True, default=str))
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
