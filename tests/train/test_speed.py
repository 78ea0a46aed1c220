"""The speed switches compute what the plain paths compute: the compact LM head and the shared-prefix loss give
TRL's log-probabilities, entropies and gradients; shared-prefix rollouts give `generate`'s logits and tokens; a
GRPO step with the switches on ends with the weights of the same step with them off."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

from patarm.train.speed import compact_lm_head, prompt_groups, shared_prefix_generate, shared_prefix_logps

G, LC = 4, 6


def tiny_model(seed: int = 0) -> Qwen3ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True,
                         attn_implementation="sdpa", pad_token_id=0, eos_token_id=1, bos_token_id=2)
    return Qwen3ForCausalLM(config)


def grouped_batch(prompt_lengths=(9, 5, 7), seed: int = 1):
    """G left-padded copies of each prompt, then completions with some positions masked after an 'EOS'."""
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, 300, (n,), generator=g) for n in prompt_lengths]
    width = max(prompt_lengths)
    ids, mask = [], []
    for p in prompts:
        for _ in range(G):
            ids.append(torch.cat([torch.zeros(width - len(p), dtype=torch.long), p]))
            mask.append(
                torch.cat([torch.zeros(width - len(p), dtype=torch.long), torch.ones(len(p), dtype=torch.long)])
            )
    completions = torch.randint(3, 300, (len(ids), LC), generator=g)
    completion_mask = torch.ones_like(completions)
    completion_mask[1, 3:] = 0
    completion_mask[6, 1:] = 0
    return torch.stack(ids), torch.stack(mask), completions, completion_mask


def trl_logps(model, input_ids, attention_mask):
    """What TRL's GRPO computes: each row on its own, labels on the completion only."""
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :-LC] = -100
    out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -LC:], out.entropy[:, -LC:]


@pytest.fixture()
def fused_model():
    from trl.trainer.utils import add_fused_lm_head

    model = tiny_model()
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    yield model
    compact_lm_head(False)


def test_prompt_groups_finds_identical_rows_in_any_order():
    prompts, mask, _, _ = grouped_batch()
    assert prompt_groups(prompts, mask) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert prompt_groups(prompts[[0, 4, 1, 8]], mask[[0, 4, 1, 8]]) == [[0, 2], [1], [3]]


@pytest.mark.parametrize("max_rows, shuffled", [(None, False), (4, False), (5, False), (None, True), (5, True)])
def test_shared_prefix_loss_gives_trl_logps_entropies_and_gradients(fused_model, max_rows, shuffled):
    """Also with the rows shuffled, as TRL shuffles a generation batch before the loss."""
    prompts, mask, completions, completion_mask = grouped_batch()
    if shuffled:
        order = torch.randperm(prompts.size(0), generator=torch.Generator().manual_seed(7))
        prompts, mask, completions, completion_mask = (
            prompts[order],
            mask[order],
            completions[order],
            completion_mask[order],
        )
    input_ids, attention_mask = torch.cat([prompts, completions], 1), torch.cat([mask, completion_mask], 1)
    valid = completion_mask.bool()
    ref_lp, ref_ent = trl_logps(fused_model, input_ids, attention_mask)
    (ref_lp * completion_mask).sum().backward()
    ref_grads = [p.grad.clone() for p in fused_model.parameters()]
    fused_model.zero_grad()
    compact_lm_head()
    lp, ent = shared_prefix_logps(fused_model, input_ids, attention_mask, LC, compute_entropy=True, max_rows=max_rows)
    assert lp.shape == ref_lp.shape
    assert torch.allclose(lp[valid], ref_lp[valid], atol=1e-5)
    assert torch.allclose(ent[valid], ref_ent[valid], atol=1e-5)
    assert (lp[~valid] == 0).all()
    (lp * completion_mask).sum().backward()
    for ref, p in zip(ref_grads, fused_model.parameters()):
        assert torch.allclose(p.grad, ref, atol=1e-5, rtol=1e-4)


def test_compact_lm_head_scores_the_same_positions(fused_model):
    prompts, mask, completions, completion_mask = grouped_batch()
    input_ids, attention_mask = torch.cat([prompts, completions], 1), torch.cat([mask, completion_mask], 1)
    full, _ = trl_logps(fused_model, input_ids, attention_mask)
    compact_lm_head()
    compact, _ = trl_logps(fused_model, input_ids, attention_mask)
    assert torch.allclose(full, compact, atol=1e-6)


def test_shared_prefix_rollouts_give_generates_logits_and_tokens():
    model = tiny_model(seed=3).eval()
    prompts, mask, _, _ = grouped_batch(seed=4)
    config = GenerationConfig(max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=1,
                              output_logits=True, return_dict_in_generate=True)
    ref = model.generate(input_ids=prompts, attention_mask=mask, generation_config=config)
    calls = []

    def counting_generate(**kwargs):
        calls.append(kwargs["input_ids"].shape)
        return model.generate(**kwargs)

    out = shared_prefix_generate(counting_generate, model, input_ids=prompts, attention_mask=mask,
                                 generation_config=config)
    assert torch.equal(out.sequences, ref.sequences)
    order = torch.tensor([5, 0, 9, 1, 4, 8, 2, 6, 10, 3, 7, 11])  # a prompt's rows need not be adjacent
    mixed = shared_prefix_generate(model.generate, model, input_ids=prompts[order], attention_mask=mask[order],
                                   generation_config=config)
    assert torch.equal(mixed.sequences, ref.sequences[order])
    for a, b in zip(out.logits, ref.logits):
        assert torch.allclose(a, b, atol=1e-4)
    assert len(calls) == 1


def test_shared_prefix_rollouts_fall_back_when_no_prompt_repeats():
    model = tiny_model().eval()
    prompts, mask, _, _ = grouped_batch()
    distinct = prompts[[0, 4, 8]], mask[[0, 4, 8]]
    seen = []

    def plain(**kwargs):
        seen.append(sorted(kwargs))
        return "plain"

    assert shared_prefix_generate(plain, model, input_ids=distinct[0], attention_mask=distinct[1]) == "plain"
    assert seen == [["attention_mask", "input_ids"]]


@pytest.mark.slow
def test_grpo_steps_with_the_switches_end_where_plain_steps_end(tmp_path, sft_judge):
    """Two GRPO-PAR steps from the same SFT judge and seed: shared-prefix loss and rollouts on, then off. The
    rollouts, rewards and updated weights agree (up to float rounding)."""
    import json

    from transformers import AutoModelForCausalLM

    from patarm.train import grpo
    from patarm.train import parse_args as parse

    root = Path(__file__).resolve().parents[2]
    runs = {}
    for on in ("true", "false"):
        out = tmp_path / on
        args = parse("grpo", ["--config", str(root / "configs/grpo/tiny.yaml"), "--model_name_or_path", str(sft_judge),
                              "--train_file", str(root / "patarm/demo/assets/if_pairs_demo.jsonl"), "--output_dir",
                              str(out), "--max_steps", "2", "--save_strategy", "no", "--report_to", "none",
                              "--shared_prefix_loss", on, "--shared_prefix_rollouts", on])
        trainer = grpo.train(*args)
        assert trainer.shared_prefix_loss is (on == "true") and trainer.shared_prefix_rollouts is (on == "true")
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        model = AutoModelForCausalLM.from_pretrained(out)
        runs[on] = ([r["reward"] for r in rows if "reward" in r], dict(model.named_parameters()))
    assert runs["true"][0] == pytest.approx(runs["false"][0], abs=1e-6)
    base = dict(AutoModelForCausalLM.from_pretrained(sft_judge).named_parameters())
    moved = max((runs["false"][1][k] - base[k]).abs().max().item() for k in base)
    assert moved > 1e-4  # the steps changed the weights, so agreeing below means something
    for name, p in runs["true"][1].items():
        assert torch.allclose(p, runs["false"][1][name], atol=moved * 1e-2), name


def test_padding_free_sft_refuses_rows_longer_than_max_length():
    from patarm.train.sft import check_lengths

    check_lengths([[1] * 10, [1] * 12], 12, ["a.jsonl"])
    with pytest.raises(ValueError, match=r"1 SFT row\(s\) of a.jsonl are longer than max_length=12.*row 2 .*13 tokens"):
        check_lengths([[1] * 10, [1] * 13], 12, ["a.jsonl"])


def test_padding_free_batches_give_the_padded_loss():
    """TRL's padding-free collator on a CPU with sdpa: the packed batch's loss is the padded batch's (transformers
    finds the sequences from the position ids when no cache is built, as in TRL's training forward)."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    model = tiny_model()
    g = torch.Generator().manual_seed(0)
    rows = []
    for n in (12, 7, 9):
        ids = torch.randint(3, 300, (n,), generator=g).tolist()
        rows.append({"input_ids": ids, "labels": [-100] * (n - 4) + ids[-4:]})
    losses = []
    for padding_free in (False, True):
        batch = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=padding_free)(rows)
        losses.append(model(**batch, use_cache=False).loss.item())
    assert losses[0] == pytest.approx(losses[1], abs=1e-5)


class _Generates:
    """Stands in for TRL's GRPOTrainer: records whether its rollouts run under an outer autocast region, and the
    dtype of each decoding forward, each in its own autocast region as accelerate wraps the model's forward."""

    def __init__(self, bf16: bool, use_vllm: bool = False):
        import contextlib
        from types import SimpleNamespace

        self.args = SimpleNamespace(bf16=bf16, fp16=False)
        # Accelerator.autocast() on a CPU under mixed_precision bf16 / no (accelerate's state is a process singleton)
        self.accelerator = SimpleNamespace(autocast=lambda: torch.autocast("cpu", dtype=torch.bfloat16) if bf16
                                           else contextlib.nullcontext())
        self.use_vllm = use_vllm
        self.layer = torch.nn.Linear(8, 8)

    def _generate_single_turn(self, *args, **kwargs):
        outer = torch.is_autocast_enabled("cpu")
        casts = []
        for _ in range(3):  # three decoded tokens, each forward in its own autocast region as accelerate wraps it
            with self.accelerator.autocast():
                casts.append(self.layer(torch.ones(1, 8)).dtype)
        return outer, casts


def test_a_plain_trainers_rollouts_run_in_one_autocast_region_under_bf16_only():
    from patarm.train.grpo import RolloutAutocastMixin

    class Policy(RolloutAutocastMixin, _Generates):
        pass

    outer, casts = Policy(bf16=True)._generate_single_turn()
    assert outer is True and set(casts) == {torch.bfloat16}
    assert _Generates(bf16=True)._generate_single_turn()[0] is False  # without the mixin, per-forward regions only
    outer, casts = Policy(bf16=False)._generate_single_turn()
    assert outer is False and set(casts) == {torch.float32}
    assert Policy(bf16=True, use_vllm=True)._generate_single_turn()[0] is False
