"""`patarm eval --model http://host/v1#NAME` judges through the OpenAI-compatible teacher backend."""

import pytest

from patarm.eval.cli import load_backend
from patarm.judge.backends import GenerationOptions
from patarm.teachers import OpenAITeacher


def test_endpoint_model_gives_the_http_backend(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    backend = load_backend("http://127.0.0.1:9/v1#judge-8b", GenerationOptions(max_new_tokens=64, temperature=0.7))
    assert isinstance(backend, OpenAITeacher) and backend.model == "judge-8b"
    assert backend.url == "http://127.0.0.1:9/v1/chat/completions"
    assert backend.params["max_tokens"] == 64 and backend.params["temperature"] == 0.7


def test_endpoint_without_model_name_is_a_clear_error():
    with pytest.raises(ValueError, match="name the served model after '#'"):
        load_backend("http://127.0.0.1:9/v1", GenerationOptions())


def test_vllm_model_without_vllm_installed_says_how_to_get_it():
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
        pytest.skip("vLLM is installed: this checks the message shown without it")
    except ImportError:
        pass
    with pytest.raises(ImportError, match="needs vLLM"):
        load_backend("vllm:Qwen/Qwen3-8B", GenerationOptions())
