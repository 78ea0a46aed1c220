"""Splitting OpenRLHF's rendered queries into the conversation and the response."""

import pytest

from patarm.models.tiny import qwen3_chat_template
from patarm.serve.queries import prompt_messages, split_query

CHATML_PROMPT = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWrite one word.<|im_end|>\n"
                 "<|im_start|>assistant\n")
LLAMA3_PROMPT = ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWrite one word.<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n")


@pytest.mark.parametrize("prompt, query, with_prompt", [
    (CHATML_PROMPT, CHATML_PROMPT + "Ship.<|im_end|>", True),
    (CHATML_PROMPT, "<|endoftext|><|endoftext|>" + CHATML_PROMPT + "Ship.<|im_end|><|endoftext|>", False),
    (CHATML_PROMPT, CHATML_PROMPT + "<think>\nmaybe boat\n</think>\n\nShip.<|im_end|>", False),
    (LLAMA3_PROMPT, LLAMA3_PROMPT + "Ship.<|eot_id|>", True),
    (LLAMA3_PROMPT, LLAMA3_PROMPT + "Ship.<|eot_id|>", False),
])
def test_the_response_and_the_user_turn_are_recovered(prompt, query, with_prompt):
    conversation, response = split_query(query, prompt if with_prompt else None)
    assert response == "Ship."
    assert [m for m in conversation if m["role"] == "user"] == [{"role": "user", "content": "Write one word."}]


def test_a_real_chat_template_round_trips():
    from jinja2 import Template

    messages = [{"role": "user", "content": "Name a color <in lowercase>."}]
    prompt = Template(qwen3_chat_template()).render(messages=messages, add_generation_prompt=True,
                                                    enable_thinking=False)
    conversation, response = split_query(prompt + "blue<|im_end|>\n", prompt)
    assert (conversation, response) == (messages, "blue")


def test_plain_prompts_stay_text_and_unsplittable_queries_say_which_and_what_to_do():
    assert split_query("Question: 2+2?\nAnswer: 4", "Question: 2+2?\nAnswer:") == ("Question: 2+2?\nAnswer:", "4")
    assert prompt_messages("no markup here") == "no markup here"
    with pytest.raises(ValueError, match=r"query 3: no `prompts` given .* send `prompts` too"):
        split_query("Question: 2+2? Answer: 4", index=3)
    with pytest.raises(ValueError, match=r"query 0: its prompt \(prompts\[0\]\) does not occur"):
        split_query(CHATML_PROMPT + "x", "another prompt")
