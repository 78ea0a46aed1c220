"""The CPU fused LM head (`patarm.train.lm_head`): TRL's `ChunkedLogProbFunction` results and gradients, computed a
token block at a time; TRL's own function off the CPU."""

from __future__ import annotations

import pytest
import torch

from patarm.train import lm_head

OUT = ("log_probs", "entropy", "log_sum_sq_probs", "mean_logits", "is_top1")


def _inputs(seed: int, n: int = 300, h: int = 32, v: int = 5000, bias: bool = False):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, h, generator=g).requires_grad_()
    weight = (torch.randn(v, h, generator=g) * 0.3).requires_grad_()
    b = (torch.randn(v, generator=g) * 0.1).requires_grad_() if bias else None
    targets = torch.randint(0, v, (n,), generator=g)
    return hidden, weight, b, targets


def _run(fn, inputs, temperature, softcap, scale, outputs, autocast, seed):
    hidden, weight, bias, targets = (x.detach().clone().requires_grad_() if x is not None and x.is_floating_point()
                                     else x for x in inputs)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = fn.apply(hidden, weight, bias, targets, temperature, 1024, softcap, scale, outputs)
    g = torch.Generator().manual_seed(seed + 1)
    loss = (out[0] * torch.randn(out[0].shape, generator=g)).sum()
    if out[1] is not None:
        loss = loss + (out[1] * torch.randn(out[1].shape, generator=g)).sum()
    loss.backward()
    grads = [x.grad for x in (hidden, weight, bias) if x is not None]
    return out, grads


@pytest.mark.parametrize("autocast", [False, True])
@pytest.mark.parametrize("temperature, softcap, scale, bias, outputs", [
    (1.0, None, 1.0, False, OUT),
    (0.7, None, 1.0, False, ("log_probs", "entropy")),   # GRPO's request, a sampling temperature
    (1.0, None, 1.0, False, ("log_probs",)),             # no entropy gradient path
    (1.3, 30.0, 0.5, True, OUT),                         # a softcap, a logit scale and a bias
])
def test_cpu_head_gives_trls_outputs_and_gradients(monkeypatch, autocast, temperature, softcap, scale, bias, outputs):
    from trl.kernels import ChunkedLogProbFunction

    monkeypatch.setattr(lm_head, "TOKEN_BLOCK", 128)  # several token blocks, the last one short
    inputs = _inputs(0, bias=bias)
    ref, ref_grads = _run(ChunkedLogProbFunction, inputs, temperature, softcap, scale, outputs, autocast, 0)
    got, got_grads = _run(lm_head.CpuLogProbFunction, inputs, temperature, softcap, scale, outputs, autocast, 0)
    tol = {"atol": 2e-2, "rtol": 2e-2} if autocast else {"atol": 1e-4, "rtol": 1e-4}
    for name, r, o in zip(OUT, ref, got):
        assert (r is None) == (o is None), name
        if r is None:
            continue
        if r.dtype == torch.bool:  # the top-1 flag may flip only where two logits tie within rounding
            assert (r == o).float().mean() > 0.99, name
        else:
            torch.testing.assert_close(o, r, **tol, msg=name)
    for r, o in zip(ref_grads, got_grads):
        scale_ = r.abs().max().item()
        torch.testing.assert_close(o, r, atol=scale_ * (2e-2 if autocast else 1e-4), rtol=0)


def test_trls_fused_forward_takes_the_cpu_head_once_installed_and_its_own_again_after():
    """Through TRL's own fused forward on a tiny model: the same per-token log-probs and entropies either way."""
    import trl.trainer.utils as trl_utils
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.kernels import ChunkedLogProbFunction

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=2))
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    ids = torch.randint(0, 300, (2, 12))
    labels = ids.clone()
    labels[:, :4] = -100
    seen = []
    original = lm_head.CpuLogProbFunction.apply

    def spy(*a):
        seen.append(1)
        return original(*a)

    try:
        lm_head.install_cpu_lm_head()
        lm_head.CpuLogProbFunction.apply = spy
        ours = model(input_ids=ids, labels=labels, fused_lm_head=True)
        assert seen
        lm_head.install_cpu_lm_head(False)
        assert trl_utils._ChunkedLogProbFunction is ChunkedLogProbFunction
        theirs = model(input_ids=ids, labels=labels, fused_lm_head=True)
    finally:
        del lm_head.CpuLogProbFunction.apply  # torch.autograd.Function's again
        lm_head.install_cpu_lm_head(False)
    torch.testing.assert_close(ours.log_probs, theirs.log_probs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.entropy, theirs.entropy, atol=1e-5, rtol=1e-5)
