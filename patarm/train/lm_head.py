"""TRL's fused LM head on a CPU, in a few large passes instead of many (a speed switch of `patarm.train.speed`).

TRL (>= 1.16) computes every training loss of SFT and GRPO through a fused LM head
(`trl.kernels.ChunkedLogProbFunction`): per-token log-probabilities of `hidden @ weight.T` without the `[N, V]`
logits. Where Triton runs, a kernel folds each logits tile in one pass. Elsewhere TRL folds each
`[4096, 32768]` tile with a dozen torch operations, each writing a new tile-sized temporary (512 MB in fp32), and
the backward projects in fp32 after copying each tile to fp32 — measured on SmolLM2's 49k-word head, 12.7 of a
policy GRPO step's 30 s of forward and backward went there (`bench/policy_grpo.py`, docs/downstream.md).

`CpuLogProbFunction` computes the same quantities from the same products: the forward projection in the compute
dtype (autocast's, else the input's) as TRL's, every reduction in fp32, and the backward's projections in fp32 as
TRL's CPU path — but a block of tokens at a time over the whole vocabulary, in two reused buffers, with in-place
operations and torch's fused `logsumexp`. `install_cpu_lm_head()` routes TRL's fused head to it on a CPU (any other
device keeps TRL's); tests/train/test_lm_head.py checks its outputs and gradients against TRL's.
"""

from __future__ import annotations

import torch

OUTPUTS = ("entropy", "log_sum_sq_probs", "mean_logits", "is_top1")
TOKEN_BLOCK = 1024  # tokens per block: two fp32 [1024, V] buffers (400 MB at V = 49k)


def _logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
            mm_buf: torch.Tensor | None, scale: float, softcap: float | None, inv_t: float) -> torch.Tensor | None:
    """`out` (fp32) = the transformed logits of `hidden` against `weight`, projected in their (compute) dtype —
    through `mm_buf` when that is not fp32; returns tanh's value under a softcap (the backward's derivative needs
    it), else None."""
    if mm_buf is None:
        torch.mm(hidden, weight.t(), out=out)
    else:
        out.copy_(torch.mm(hidden, weight.t(), out=mm_buf[: out.shape[0]]))
    if bias is not None:
        out.add_(bias.to(out.dtype))
    t = None
    if softcap is not None:
        out.mul_(scale / softcap).tanh_()
        t = out.clone()
        out.mul_(softcap * inv_t)
    elif scale * inv_t != 1.0:
        out.mul_(scale * inv_t)
    return t


def _scratch(rows: int, vocab: int, dtype: torch.dtype, device: torch.device, probs: bool):
    """A block's buffers: the fp32 logits, the compute-dtype projection (None in fp32), the fp32 probabilities
    (None when `probs` is false)."""
    f32 = {"device": device, "dtype": torch.float32}
    mm = None if dtype == torch.float32 else torch.empty((rows, vocab), device=device, dtype=dtype)
    return torch.empty((rows, vocab), **f32), mm, torch.empty((rows, vocab), **f32) if probs else None


class CpuLogProbFunction(torch.autograd.Function):
    """`trl.kernels.ChunkedLogProbFunction`'s interface and results, computed a token block at a time (module doc).
    `chunk_size` (TRL's vocabulary tile) is accepted and ignored: each block spans the whole vocabulary."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, chunk_size, final_logit_softcapping=None,
                logit_scale=1.0, outputs=("log_probs",) + OUTPUTS):
        ctx.set_materialize_grads(False)
        n, vocab = hidden.shape[0], weight.shape[0]
        dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else hidden.dtype
        w = weight.to(dtype)
        args = (float(logit_scale), final_logit_softcapping, 1.0 / temperature)
        f32 = {"device": hidden.device, "dtype": torch.float32}
        log_z, target = torch.empty(n, **f32), torch.empty(n, **f32)
        want = {name: name in outputs for name in OUTPUTS}
        extra = {name: torch.empty(n, **f32) for name in ("entropy", "log_sum_sq_probs", "mean_logits") if want[name]}
        is_top1 = torch.empty(n, dtype=torch.bool, device=hidden.device) if want["is_top1"] else None
        block = min(n, TOKEN_BLOCK)
        z_buf, mm_buf, p_buf = _scratch(block, vocab, dtype, hidden.device,
                                        want["entropy"] or want["log_sum_sq_probs"])
        for s in range(0, n, block):
            e = min(s + block, n)
            z = z_buf[: e - s]
            _logits(hidden[s:e].to(dtype), w, bias, z, mm_buf, *args)
            torch.logsumexp(z, dim=-1, out=log_z[s:e])
            target[s:e] = z.gather(1, targets[s:e, None]).squeeze(1)
            if is_top1 is not None:  # argmax takes the first maximum, as TRL's tie rule does
                is_top1[s:e] = z.argmax(dim=-1) == targets[s:e]
            if want["mean_logits"]:
                extra["mean_logits"][s:e] = z.sum(dim=-1) / vocab
            if p_buf is not None:
                z.sub_(log_z[s:e, None])  # z is now log p
                p = torch.exp(z, out=p_buf[: e - s])
                if want["log_sum_sq_probs"]:
                    extra["log_sum_sq_probs"][s:e] = (p * p).sum(dim=-1).log()
                if want["entropy"]:
                    extra["entropy"][s:e] = -(p.mul_(z)).sum(dim=-1)
        logprobs = target - log_z
        entropy = extra.get("entropy")
        log_sum_sq = extra.get("log_sum_sq_probs")
        mean_logits = extra.get("mean_logits")
        ctx.save_for_backward(hidden, weight, bias, targets, log_z, log_z if entropy is None else entropy)
        ctx.dtype, ctx.args = dtype, args
        ctx.mark_non_differentiable(*(x for x in (log_sum_sq, mean_logits, is_top1) if x is not None))
        return logprobs, entropy, log_sum_sq, mean_logits, is_top1

    @staticmethod
    def backward(ctx, grad_logprobs, grad_entropy, *_):
        hidden, weight, bias, targets, log_z, entropy = ctx.saved_tensors
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        scale, softcap, inv_t = ctx.args
        if grad_logprobs is None and grad_entropy is None:
            return (None,) * 9
        gl = grad_logprobs.float() if grad_logprobs is not None else None
        ge = grad_entropy.float() if grad_entropy is not None else None
        n, vocab = hidden.shape[0], weight.shape[0]
        w, w32 = weight.to(ctx.dtype), weight.float()
        f32 = {"device": hidden.device, "dtype": torch.float32}
        grad_hidden = torch.empty(hidden.shape, **f32) if need_hidden else None
        grad_weight = torch.zeros(weight.shape, **f32) if need_weight else None
        grad_bias = torch.zeros(bias.shape, **f32) if need_bias else None
        block = min(n, TOKEN_BLOCK)
        z_buf, mm_buf, p_buf = _scratch(block, vocab, ctx.dtype, hidden.device, ge is not None)
        for s in range(0, n, block):
            e = min(s + block, n)
            z = z_buf[: e - s]
            t = _logits(hidden[s:e].to(ctx.dtype), w, bias, z, mm_buf, scale, softcap, inv_t)
            z.sub_(log_z[s:e, None])  # log p
            if ge is None:
                g = z.exp_().mul_(-gl[s:e, None])  # d log p_target / dz_j = 1[j = target] - p_j
            else:
                p = torch.exp(z, out=p_buf[: e - s])
                # d entropy / dz_j = -p_j (log p_j + entropy); d log p_target / dz_j = 1[j = target] - p_j
                z.add_(entropy[s:e, None]).mul_(p).mul_(-ge[s:e, None])
                if gl is not None:
                    z.sub_(p.mul_(gl[s:e, None]))
                g = z
            if gl is not None:
                g.scatter_add_(1, targets[s:e, None], gl[s:e, None])
            g.mul_(inv_t)
            if t is not None:
                g.mul_(t.mul_(t).neg_().add_(1.0))
            g.mul_(scale)
            if grad_hidden is not None:
                torch.mm(g, w32, out=grad_hidden[s:e])
            if grad_weight is not None:
                grad_weight.addmm_(g.t(), hidden[s:e].float())
            if grad_bias is not None:
                grad_bias += g.sum(dim=0)
        return (grad_hidden.to(hidden.dtype) if grad_hidden is not None else None,
                grad_weight.to(weight.dtype) if grad_weight is not None else None,
                grad_bias.to(bias.dtype) if grad_bias is not None else None, None, None, None, None, None, None)


class _FusedHead:
    """What TRL's fused forward calls as `_ChunkedLogProbFunction`: this module's function for CPU tensors, TRL's
    own everywhere else."""

    trl = None

    @classmethod
    def apply(cls, hidden, *args):
        fn = CpuLogProbFunction if hidden.device.type == "cpu" else cls.trl
        return fn.apply(hidden, *args)


def install_cpu_lm_head(enabled: bool = True) -> None:
    """Route TRL's fused LM head to `CpuLogProbFunction` on a CPU (process-wide, idempotent); `enabled=False`
    restores TRL's own function."""
    import trl.trainer.utils as trl_utils
    from trl.kernels import ChunkedLogProbFunction

    _FusedHead.trl = ChunkedLogProbFunction
    trl_utils._ChunkedLogProbFunction = _FusedHead if enabled else ChunkedLogProbFunction
