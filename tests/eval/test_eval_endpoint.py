"""Model specs: `http://host/v1#NAME` gives the OpenAI-compatible backend, `vllm:` the vLLM one."""

import pytest

from patarm.backends import GenerationOptions, make_backend
from patarm.backends.openai import OpenAIBackend


def test_endpoint_model_gives_the_http_backend(tmp_path):
    backend = make_backend("http://127.0.0.1:9/v1#judge-8b", GenerationOptions(max_new_tokens=64, temperature=0.7))
    assert isinstance(backend.backend, OpenAIBackend) and backend.model_id == "judge-8b"
    assert backend.backend.url == "http://127.0.0.1:9/v1/chat/completions"
    assert backend.sampling()["max_tokens"] == 64 and backend.sampling()["temperature"] == 0.7


def test_endpoint_without_model_name_is_a_clear_error():
    with pytest.raises(ValueError, match="name the served model after '#'"):
        make_backend("http://127.0.0.1:9/v1", GenerationOptions())


def test_vllm_model_without_vllm_installed_says_how_to_get_it():
    try:
        import vllm  # noqa: F401
        pytest.skip("vLLM is installed: this checks the message shown without it")
    except ImportError:
        pass
    with pytest.raises(ImportError, match="needs vLLM"):
        make_backend("vllm:Qwen/Qwen3-8B", GenerationOptions())
