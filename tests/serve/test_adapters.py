"""The TRL, verl and OpenRLHF adapters against a live server on loopback, called the way each framework calls them."""

import importlib.util
import json
import pickle
import urllib.request

import numpy as np
import pytest
from conftest import running
from serve_fakes import expected_score

from patarm.serve.adapters import openrlhf as openrlhf_adapter
from patarm.serve.adapters import verl as verl_adapter
from patarm.serve.adapters.trl import JudgeReward
from patarm.serve.client import JudgeClient, ServeError

TOKEN = "adapter-token"
CHATML = "<|im_start|>user\n{p}<|im_end|>\n<|im_start|>assistant\n"


def _load_by_path(module, name="custom_module"):
    """What verl and OpenRLHF do with a reward file path: import it as a fresh module."""
    spec = importlib.util.spec_from_file_location(name, module.__file__)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture
def secured(fake):
    with running(fake, token=TOKEN) as url:
        yield url


def test_trl_reward_scores_conversational_completions_with_extra_columns(fake, secured):
    reward = JudgeReward(secured, client_kwargs={"token": TOKEN})
    prompts = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"Q{i}"}] for i in range(3)]
    completions = [[{"role": "assistant", "content": c}] for c in ("alpha", "unparseable", "gamma")]
    logged = {}
    out = reward(prompts=prompts, completions=completions, completion_ids=[[1], [2], [3]],
                 domain=["chat", "math", None], trainer_state=object(), log_extra=lambda *a: None,
                 log_metric=lambda name, value: logged.update({name: value}))
    assert out == [expected_score("alpha"), None, expected_score("gamma")]
    assert logged == {"patarm_judge/valid": 2 / 3} and reward.__name__ == "patarm_judge"
    copy = pickle.loads(pickle.dumps(reward))  # TRL and Ray may copy reward functions
    copy.invalid = 0.0
    assert copy(prompts=["plain"], completions=["unparseable"]) == [0.0]
    reward.close(), copy.close()


def test_trl_reward_needs_exactly_one_source():
    with pytest.raises(ValueError, match="exactly one"):
        JudgeReward()
    with pytest.raises(ValueError, match="exactly one"):
        JudgeReward("http://127.0.0.1:1", model="x")


def test_verl_reward_loaded_by_path_with_reward_kwargs(secured, monkeypatch):
    monkeypatch.setenv("PATARM_SERVE_TOKEN", TOKEN)
    module = _load_by_path(verl_adapter)
    reward_kwargs = {"url": secured}  # custom_reward_function.reward_kwargs

    def wrapped(*args, **kwargs):  # verl's get_custom_reward_fn
        return module.compute_score_batch(*args, **kwargs, **reward_kwargs)

    extra = [{"prompt": np.array([{"role": "user", "content": "Q"}], dtype=object), "domain": "math"},
             {"question": "Q2", "split": "train"}, {"prompt": "Q3"}]
    scores = wrapped(data_sources=["gsm8k"] * 3, solution_strs=["one", "two", "unparseable"],
                     ground_truths=["1", "2", "3"], extra_infos=extra)
    assert scores == [expected_score("one"), expected_score("two"), 0.0]
    single = module.compute_score(data_source="x", solution_str="one", ground_truth=None, extra_info={"prompt": "Q"},
                                  url=secured)
    assert single == expected_score("one")
    with pytest.raises(ValueError, match=r"extra_info\['prompt'\]"):
        module.compute_score("x", "one", None, {"split": "train"}, url=secured)
    for client in module._CLIENTS.values():
        client.close()


def test_openrlhf_reward_file_with_a_token(secured, monkeypatch):
    monkeypatch.setenv("PATARM_SERVE_URL", secured)
    monkeypatch.setenv("PATARM_SERVE_TOKEN", TOKEN)
    module = _load_by_path(openrlhf_adapter, "reward_func")
    prompts = [CHATML.format(p="colour?"), CHATML.format(p="shape?")]
    queries = [p + r + "<|im_end|>" for p, r in zip(prompts, ("red", "unparseable"))]
    out = module.reward_func(queries, prompts, ["", ""])
    assert out["rewards"].tolist() == [expected_score("red"), 1.0]
    assert out["scores"].tolist() == pytest.approx([(expected_score("red") - 1) / 9, 0.0])
    assert out["extra_logs"]["judge_valid"].tolist() == [1.0, 0.0]
    module._CLIENT[0].close()


def test_openrlhf_remote_rm_url_posts_straight_to_get_reward(server):
    # OpenRLHF's own client: POST {"query", "prompts", "labels"} as JSON, read "rewards" (no token, no id)
    prompts = [CHATML.format(p="colour?")]
    data = json.dumps({"query": [prompts[0] + "red<|im_end|>"], "prompts": prompts, "labels": ["x"]}).encode()
    request = urllib.request.Request(server + "/get_reward", data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.loads(response.read())["rewards"] == [expected_score("red")]


def test_the_client_refuses_bad_requests_at_once_and_gives_up_on_a_dead_server(secured):
    with JudgeClient(secured, token="wrong", max_retries=3, backoff_s=0.01) as client:
        with pytest.raises(ServeError, match="HTTP 401"):
            client.judge([{"prompt": "p", "response": "r"}])
        assert client.retries == 0
    with JudgeClient("http://127.0.0.1:9", max_retries=2, backoff_s=0.01) as dead:
        with pytest.raises(ServeError, match="failed 3 times"):
            dead.judge([{"prompt": "p", "response": "r"}])
        assert dead.retries == 2
