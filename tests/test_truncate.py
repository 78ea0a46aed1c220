"""Prompt fitting on a huge input: each block is found without a regex scan and tokenised once per cut."""

import random
import re

from patarm.judge import render_pointwise
from patarm.judge.truncate import MARKER, _block, truncate_messages


def test_the_block_finder_finds_what_the_regex_it_replaces_found():
    rng = random.Random(0)
    pieces = ["<response>", "</response>", "<response_a>", "</response_a>", "<conversation>", "\n", "a", " "]
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        for name in ("response", "response_a", "conversation"):
            found = re.search(rf"(<{name}>\n?)(.*?)(\n?</{name}>)", text, re.DOTALL)
            assert _block(text, name) == (found.span(2) if found else None), (text, name)


class _Counting:
    """A tokenizer that records the length of every text it tokenises and every id list it decodes."""

    def __init__(self, tokenizer):
        self.tokenizer, self.encoded, self.decoded = tokenizer, [], []

    def apply_chat_template(self, messages, **kwargs):
        self.encoded.append(sum(len(m["content"]) for m in messages))
        return self.tokenizer.apply_chat_template(messages, **kwargs)

    def encode(self, text, **kwargs):
        self.encoded.append(len(text))
        return self.tokenizer.encode(text, **kwargs)

    def decode(self, ids, **kwargs):
        self.decoded.append(len(ids))
        return self.tokenizer.decode(ids, **kwargs)


def test_a_huge_response_is_tokenised_once_to_count_and_once_to_cut_and_never_decoded_whole():
    """A long response (a hostile client's 3.5 MB) was tokenised three times and two halves of its ids decoded (to test
    whether it could be cut before cutting it): seconds of CPU, and tens of ms holding the GIL per call."""
    from patarm.models.tiny import build_tiny_judge

    _, tokenizer = build_tiny_judge(["word " * 50, "<score>7</score>"], vocab_size=300, hidden_size=32, num_layers=1)
    counting = _Counting(tokenizer)
    messages = render_pointwise("question", "word " * 4000, "pointwise-compact")
    out, cut = truncate_messages(messages, counting, 192)
    assert cut and MARKER.strip() in out[-1]["content"]
    assert len(tokenizer.apply_chat_template(out, tokenize=True, add_generation_prompt=True, return_dict=False)) <= 192
    assert sum(n > 10_000 for n in counting.encoded) == 2, counting.encoded
    assert max(counting.decoded) <= 192, counting.decoded
