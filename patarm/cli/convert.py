"""`patarm convert gguf --input FILE --output DIR`: a GGUF model file to a plain Hugging Face checkpoint.

`--input` takes a `.gguf` file or any GGUF model spec (`gguf:FILE`, `gguf:PACKAGE`, `smollm2`). Without
`--output` the model is converted into the user cache, where `--model smollm2`-style specs find it.
Errors (a missing file, not a GGUF file, a package or extra not installed, a non-empty output folder)
print one paragraph and exit with status 2.
"""

from __future__ import annotations

import argparse
import json

from patarm.models.gguf import DTYPES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patarm convert", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="format", metavar="<format>", required=True)
    gguf = sub.add_parser("gguf", help="a llama.cpp GGUF file to safetensors + tokenizer + generation config",
                          description="Dequantise a GGUF model into a plain Hugging Face checkpoint folder.")
    gguf.add_argument("--input", required=True,
                      help="a .gguf file, or a spec: gguf:FILE, gguf:PACKAGE, smollm2")
    gguf.add_argument("--output", default=None,
                      help="folder to write (must not exist or be empty); default: the user cache "
                           "($PATARM_CACHE, $XDG_CACHE_HOME/patarm or ~/.cache/patarm)")
    gguf.add_argument("--dtype", default="float32", choices=DTYPES,
                      help="dtype of the saved weights (float32 keeps the dequantised values exactly)")
    gguf.add_argument("--overwrite", action="store_true", help="replace a non-empty --output folder")
    return parser


def run_gguf(args: argparse.Namespace) -> dict:
    """Convert as the arguments say; returns a summary (folder, seconds, megabytes, pad-token choice)."""
    from patarm.models.gguf import convert_gguf, folder_bytes, read_provenance
    from patarm.models.gguf_cache import GGUFSpec, cached_conversion, locate_gguf, parse_gguf_spec

    parsed = parse_gguf_spec(args.input) or GGUFSpec("file", args.input)
    source = locate_gguf(parsed)
    if args.output is None:
        if args.dtype != "float32":
            raise ValueError("--dtype applies to an explicit --output; the cache always holds float32")
        folder = cached_conversion(source)
        provenance = read_provenance(folder)
    else:
        provenance = convert_gguf(source, args.output, dtype=args.dtype, overwrite=args.overwrite)
        folder = args.output
    return {"output": str(folder), "source": str(source), "seconds": provenance.get("seconds"),
            "megabytes": round(folder_bytes(folder) / 1e6, 1), "pad_token": provenance["pad_token"],
            "eos_tokens": provenance["eos_tokens"]}


def main(command: str, argv: list[str]) -> None:
    # a missing file, not a GGUF file, a package or extra not installed: one paragraph, exit 2 (patarm.cli)
    print(json.dumps(run_gguf(build_parser().parse_args(argv)), indent=2))
