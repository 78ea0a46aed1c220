"""`patarm serve` flags: a bad flag is one paragraph on stderr and exit code 2, before any model loads."""

import importlib.util

import pytest

from helpers import run_cli
from patarm.cli.serve import read_token


def main(argv):
    run_cli("serve", *argv)


@pytest.mark.parametrize("argv, says", [
    ([], "no such folder"),  # the default model is the run's export, runs/default/export
    (["--model", "m", "--max-batch", "0"], "--max_batch must be > 0, got 0"),
    (["--model", "m", "--timeout-s", "soon"], "--timeout_s/--timeout-s: invalid float value: 'soon'"),
    (["--model", "m", "--backend", "tpu"], "--backend: invalid choice: 'tpu'"),
    (["--model", "m", "--port", "70000"], "--port must be 0..65535"),
    (["--model", "m", "--token-env", "A", "--token-file", "f"], "not both"),
    (["--model", "m", "--token-env", "PATARM_TEST_UNSET_VAR"], "unset or empty"),
    (["--model", "m", "--token-file", "/nonexistent/token"], "cannot read it"),
    (["--model", "./no/such/judge"], "no such folder"),
    (["--model", "tiny:layers=2"], "is not key=value with a key in"),
    (["--model", "m", "--backend", "vllm", "--dtype", "bfloat16"], "--dtype applies to --backend hf"),
    (["--model", "m", "--dtype", "int8"], "--dtype: invalid choice: 'int8'"),
])
def test_bad_flags_exit_2_with_one_paragraph(argv, says, capsys, monkeypatch):
    monkeypatch.delenv("PATARM_TEST_UNSET_VAR", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert says in err and err.startswith("patarm serve: error: ") and err.count("\n") == 1


def test_the_token_comes_from_an_env_var_or_the_first_line_of_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("PATARM_TEST_TOKEN", " abc \n")
    assert read_token("PATARM_TEST_TOKEN", None) == "abc"
    (tmp_path / "t").write_text("from-file\nignored\n")
    assert read_token(None, str(tmp_path / "t")) == "from-file"
    assert read_token(None, None) is None
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        read_token(None, str(tmp_path / "empty"))


def test_the_vllm_backend_without_vllm_says_what_to_install(tmp_path, capsys):
    pytest.importorskip("torch")
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    with pytest.raises(SystemExit) as exit_info:
        main(["--model", str(tmp_path), "--backend", "vllm", "--port", "0"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "the vLLM backend needs vLLM" in err


def test_dtype_loads_the_judge_in_it_and_auto_follows_the_device(tmp_path, monkeypatch):
    """`--dtype` (hf): the weights in that dtype; `auto`: bfloat16 where the CPU computes in it, else float32; none:
    as saved."""
    torch = pytest.importorskip("torch")
    from patarm.serve.scorer import load_scorer
    from patarm.train import common

    def dtype_of(**kw):
        return next(load_scorer("tiny", work_dir=tmp_path, **kw).backend.model.parameters()).dtype

    assert dtype_of() == torch.float32 and dtype_of(dtype="bfloat16") == torch.bfloat16
    monkeypatch.setattr(common, "cpu_bf16", lambda *a: (False, "no bf16 instructions"))
    assert dtype_of(dtype="auto") == torch.float32
    monkeypatch.setattr(common, "cpu_bf16", lambda *a: (True, "avx512_bf16"))
    assert dtype_of(dtype="auto") == torch.bfloat16
