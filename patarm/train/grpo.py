"""GRPO with the Preference-Aware Reward (PaTaRM §3.1, §3.3): TRL's GRPOTrainer plus the
pair-preserving sampler, the PAR and format reward components, and project-side prompt truncation.

    accelerate launch -m patarm grpo --config configs/grpo/tiny.yaml

The pairs (by default the RL set of the run, `{run_dir}/prep/rl/pairs.jsonl`) become two judge prompts
each, rendered with this stage's template and rubric mode — or built by `prompt_builder`, a function named
by dotted path (e.g. a skill prompt with the pair's per-sample resources mounted).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer, ModelConfig, get_peft_config

from patarm.config import RunArguments, import_object
from patarm.data import load_pairs
from patarm.judge import load_template
from patarm.judge.truncate import truncate_judge_rows
from patarm.models.attention import install_cpu_decode_attention
from patarm.rewards import PairRewards
from patarm.sampling import PairRepeatSampler, check_pair_batching, pairs_from_columns
from patarm.train.common import (
    AtomicCheckpointMixin,
    JsonlMetricsCallback,
    load_model,
    require_input,
    setup_logging,
    thinking_switch,
    train_and_save,
)
from patarm.train.lm_head import install_cpu_lm_head
from patarm.train.rows import load_prompt_builder, pairs_to_judge_rows
from patarm.train.speed import (
    attention_accepts_block_mask,
    compact_lm_head,
    shared_prefix_generate,
    shared_prefix_logps,
)

logger = logging.getLogger(__name__)


@dataclass
class GRPODataArguments(RunArguments):
    """Where the pairs come from and how they become judge prompts and rewards."""

    train_file: str = field(default="{run_dir}/prep/rl/pairs.jsonl", metadata={"path": "input", "help":
                            "preference pairs (any supported layout; jsonl/json/parquet or a hub id): by default the "
                            "rejection-sampled RL set `patarm prep` writes into the run folder"})
    on_error: str = field(default="raise", metadata={"help": "Malformed rows: 'raise' or 'skip' (counted)."})
    max_pairs: int | None = field(default=None, metadata={"help": "Use at most this many pairs."})
    judge_template: str = field(default="pointwise", metadata={"help": "Judge prompt template name or YAML path."})
    rubric_mode: str = field(default="adaptive", metadata={"help": "primary | generated | adaptive (paper Table 4)."})
    score_range: list[float] | None = field(
        default=None, metadata={"help": "Score range, default the template's (1 10)."}
    )
    margin: str = field(default="graded", metadata={
        "help": "PAR margin f(δ): 'graded' (1.2 / 1.4 at δ>2), 'constant' (1.3) or a dotted path to a function."})
    reward: str = field(default="par", metadata={
        "help": "par (PaTaRM's Preference-Aware Reward) or label (ablation: +1 when a rollout's verdict, its score "
                "against label_threshold, matches the pair's label, −1 otherwise)", "choices": ["par", "label"]})
    label_threshold: float | None = field(default=None, metadata={
        "help": "reward label: scores above it are a 'chosen' verdict; default the middle of the score range"})
    extra_rewards: list[str] = field(default_factory=list, metadata={
        "help": "more TRL reward functions beside PAR and the format penalty, each 'package.module:function' taking "
                "(completions, **dataset columns) and returning one float per rollout (e.g. a skill's check of the "
                "evidence a judgment states); logged under their names; weigh them with TRL's reward_weights"})
    max_prompt_length: int | None = field(default=None, metadata={
        "help": "Truncate judge prompts longer than this many tokens (conversation first, then the response)."})
    enable_thinking: bool | None = field(default=None, metadata={
        "help": "Qwen3's thinking switch for the rollouts' chat template (see `patarm sft --help`); default: what the "
                "starting judge was trained with (its patarm_config.json), else false"})
    prompt_builder: str | None = field(default=None, metadata={
        "help": "'package.module:function' taking (pair, response, template) and returning the judge prompt's chat "
                "messages, used instead of rendering the template alone (e.g. a skill prompt with the pair's "
                "per-sample resources mounted); it must build the prompts the judge was trained on"})


@dataclass
class SpeedGRPOConfig(GRPOConfig):
    """TRL's GRPOConfig; every TRL option (loss_type, beta, num_generations, use_vllm, ...) passes through, plus
    the speed switches of `patarm.train.speed` that `GRPOSpeedMixin` reads (default: on where bench/mfu.py and
    bench/policy_grpo.py measured that they pay). None of them changes what is computed."""

    shared_prefix_loss: bool | None = field(default=None, metadata={
        "help": "score the G rollouts of a prompt in one packed sequence, so the prompt's forward and backward run "
                "once (same log-probs and gradients). Default: on on a CPU with sdpa/eager attention; off on a GPU, "
                "where flash-attention kernels do not take the block mask"})
    shared_prefix_rollouts: bool | None = field(default=None, metadata={
        "help": "one prefill per prompt, its G rollouts decoded from copies of that KV cache (transformers' "
                "generate; ignored with vLLM). Default: on"})
    cpu_lm_head: bool = field(default=False, metadata={
        "help": "TRL's fused LM head computed a token block at a time on a CPU (patarm.train.lm_head: the same "
                "log-probs, entropies and gradients in a few large passes instead of a dozen tile-sized temporaries). "
                "Off by default: its float rounding differs from TRL's, and the quickstart's seeds x kernels table "
                "was measured without it; the IFEval recipe's policy turns it on (bench/policy_grpo.py)"})
    rollout_cast_once: bool = field(default=True, metadata={
        "help": "under bf16/fp16 autocast, generate the rollouts inside one autocast region, so the weights are cast "
                "to half precision once per generation batch instead of once per decoded token (autocast's cast "
                "cache; ignored with vLLM)"})



@dataclass
class PaTaRMGRPOConfig(SpeedGRPOConfig):
    """The judge's GRPO-PAR config: TRL's GRPOConfig with the speed switches (`SpeedGRPOConfig`). A batch that would
    split a pair's rollouts across reward calls is refused here, before any model loads."""

    def __post_init__(self):
        super().__post_init__()  # fills in steps_per_generation
        check_pair_batching(self.per_device_train_batch_size, self.steps_per_generation, self.num_generations)


def rollout_region(trainer: GRPOTrainer) -> contextlib.AbstractContextManager:
    """Where a trainer's transformers-generated rollouts run: under bf16/fp16 autocast (and `rollout_cast_once`, on
    by default) one autocast region around the whole generation, so each weight is cast to half precision once per
    generation batch — autocast's cast cache lives until its outermost region exits, and the model's own
    forward-wrapping region exits after every decoded token. Elsewhere (fp32, vLLM) nothing."""
    args = trainer.args
    mixed = args.bf16 or args.fp16
    if mixed and getattr(args, "rollout_cast_once", True) and not getattr(trainer, "use_vllm", False):
        return trainer.accelerator.autocast()
    return contextlib.nullcontext()


class RolloutAutocastMixin:
    """For a plain TRL GRPO trainer (e.g. a policy's): its rollouts generated inside `rollout_region`; nothing
    else changes (same sampling, same loss)."""

    def _generate_single_turn(self, *args, **kwargs):
        with rollout_region(self):
            return super()._generate_single_turn(*args, **kwargs)


class GRPOSpeedMixin:
    """The speed switches of `patarm.train.speed` for a TRL GRPOTrainer (the judge's GRPO-PAR and a policy's plain
    GRPO alike): TRL's compact LM head on a CPU, the CPU fused head (`cpu_lm_head`, default off), the CPU decode
    attention, the G rollouts of a prompt scored in one
    packed sequence (`shared_prefix_loss`; default on a CPU with sdpa/eager attention) and decoded from one prefill
    (`shared_prefix_rollouts`; default on), the rollouts in one autocast region (`rollout_region`). What is computed
    stays TRL's (tests/train/test_speed.py); a config without these fields (TRL's own GRPOConfig) gets the defaults."""

    def __init__(self, *args, **kwargs):
        cfg = kwargs["args"]
        super().__init__(*args, **kwargs)
        compact_lm_head()
        install_cpu_lm_head(bool(getattr(cfg, "cpu_lm_head", False)))  # process-wide: set by each trainer
        install_cpu_decode_attention()  # the rollouts' decode (patarm.models.attention)
        on_cpu = self.accelerator.device.type == "cpu"
        block_mask = attention_accepts_block_mask(self.accelerator.unwrap_model(self.model))
        loss = getattr(cfg, "shared_prefix_loss", None)
        self.shared_prefix_loss = (on_cpu if loss is None else bool(loss)) and block_mask
        rollouts = getattr(cfg, "shared_prefix_rollouts", None)
        self.shared_prefix_rollouts = True if rollouts is None else bool(rollouts)
        if loss and not block_mask:
            logger.warning("shared_prefix_loss needs sdpa or eager attention (a 4D block mask); this model uses %s, "
                           "so the rollouts are scored separately", self.model.config._attn_implementation)

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **multimodal):
        if not self.shared_prefix_loss or compute_aux_loss or any(v is not None for v in multimodal.values()):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **multimodal)
        logps, entropies = shared_prefix_logps(model, input_ids, attention_mask, logits_to_keep, compute_entropy,
                                               max_rows=batch_size, autocast=self.accelerator.autocast)
        return logps, entropies, None

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        generate = functools.partial(super()._generate_single_turn, prompt_ids, images, multimodal_fields,
                                     num_generations, has_tool_images)
        if self.use_vllm or getattr(self, "use_transformers_continuous_batching", False):
            return generate()
        region = rollout_region(self)
        if not self.shared_prefix_rollouts or images is not None or multimodal_fields:
            with region:
                return generate()
        model = self.accelerator.unwrap_model(self.model)
        model.generate = functools.partial(shared_prefix_generate, model.generate, model)
        try:
            with region:
                return generate()
        finally:
            del model.generate  # the class's generate again


class PaTaRMGRPOTrainer(AtomicCheckpointMixin, GRPOSpeedMixin, GRPOTrainer):
    """GRPOTrainer whose sampler keeps each pair's 2·G rollouts in the same reward call on every process
    (the batch arithmetic that makes this possible is checked by PaTaRMGRPOConfig), with the speed switches."""

    def _generate_and_score_completions(self, inputs):
        # The rollouts of step k are drawn from a seed of their own (seed, k, process), so a run resumed from a
        # checkpoint draws exactly the rollouts the uninterrupted run drew, whatever consumed random numbers before
        # (re-creating the dataloader does). The global random stream is left as it was.
        import torch

        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(self.args.seed + 1_000_003 * self.state.global_step + self.accelerator.process_index)
            return super()._generate_and_score_completions(inputs)

    def _get_train_sampler(self, dataset=None):
        dataset = self.train_dataset if dataset is None else dataset
        return PairRepeatSampler(
            pairs_from_columns(dataset["pair_id"], dataset["side"]),
            mini_repeat_count=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            shuffle=self.shuffle_dataset,
            seed=self.args.seed,
        )


class ScoreHistogramCallback(TrainerCallback):
    """Logs a histogram of the judge's parsed scores (this process's rollouts) at every log step,
    to tensorboard and wandb when they are active."""

    def __init__(self, rewards: PairRewards, trainer: GRPOTrainer):
        self.rewards, self.trainer = rewards, trainer

    def on_log(self, args, state, control, logs=None, **kwargs):
        scores, self.rewards.recent_scores = self.rewards.recent_scores, []
        if not scores or not state.is_world_process_zero:
            return
        for cb in self.trainer.callback_handler.callbacks:
            writer = getattr(cb, "tb_writer", None)
            if writer is not None:
                import numpy as np

                writer.add_histogram("par/score_hist", np.asarray(scores), state.global_step)
            if type(cb).__name__ == "WandbCallback" and getattr(cb, "_wandb", None) is not None and cb._wandb.run:
                cb._wandb.log({"par/score_hist": cb._wandb.Histogram(scores)}, commit=False)


class LogAtTrainBegin(TrainerCallback):
    """Logs fixed values once training has begun, after the trackers' callbacks opened their writers under the
    stage's output folder (a `trainer.log` before `train()` makes TensorBoard write to `./runs` instead)."""

    def __init__(self, trainer: GRPOTrainer, values: dict[str, float]):
        self.trainer, self.values = trainer, values

    def on_train_begin(self, args, state, control, **kwargs):
        self.trainer.log(dict(self.values))


def judge_rows(data: GRPODataArguments) -> tuple[list[dict], dict]:
    """Pairs → two judge-prompt rows each (chosen, rejected); returns the rows and the load manifest."""
    require_input(
        data.train_file,
        "GRPO's RL set",
        "write it with `patarm prep run --config configs/prep/<recipe>.yaml "
        f"--run_dir {data.run_dir}` (its `rl` step, rejection sampling), or pass --train_file PAIRS",
    )
    loaded = load_pairs(data.train_file, on_error=data.on_error, limit=data.max_pairs)
    if not loaded.pairs:
        raise ValueError(f"{data.train_file}: no preference pairs to train on (manifest: {loaded.manifest.to_dict()})")
    template = load_template(data.judge_template, rubric_mode=data.rubric_mode, score_range=data.score_range)
    build = load_prompt_builder(data.prompt_builder) if data.prompt_builder else None
    return pairs_to_judge_rows(loaded.pairs, template, build=build), loaded.manifest.to_dict()


def extra_reward_funcs(specs: list[str], what: str = "extra_rewards") -> list[Callable[..., list[float]]]:
    """The `extra_rewards` functions (or another option's, named by `what`), imported; a spec that does not name a
    callable is an error naming it."""
    funcs = [import_object(spec, f"{what} entry") for spec in specs]
    for spec, fn in zip(specs, funcs, strict=True):
        if not callable(fn):
            raise ValueError(f"{what} entry {spec!r} is not a function (got {type(fn).__name__})")
    return funcs


def _require_start(model: str, run_dir: str) -> None:
    """GRPO starts from the SFT judge (by default `{run_dir}/sft`): a missing folder names the stage that writes it."""
    from pathlib import Path

    from patarm.models import looks_like_path, parse_tiny_spec

    if parse_tiny_spec(model) is None and looks_like_path(model) and not Path(model).exists():
        raise FileNotFoundError(f"GRPO's starting judge {model} does not exist; write it with `patarm sft --config "
                                f"configs/sft/<recipe>.yaml --run_dir {run_dir}`, or pass --model_name_or_path")


def train(data: GRPODataArguments, args: PaTaRMGRPOConfig, model_args: ModelConfig) -> PaTaRMGRPOTrainer:
    """Build the judge, the pair dataset and the trainer; train; save. Returns the trainer."""
    setup_logging(args)
    template = load_template(data.judge_template, rubric_mode=data.rubric_mode, score_range=data.score_range)
    extra = extra_reward_funcs(data.extra_rewards)  # a bad entry fails here, before any model loads
    rows, manifest = judge_rows(data)
    _require_start(model_args.model_name_or_path, data.run_dir)
    texts = [m["content"] for r in rows for m in r["prompt"]]  # a `tiny` tokenizer is trained on them
    model, tokenizer = load_model(model_args, texts, args.seed, args.output_dir)
    data.enable_thinking = thinking_switch(data.enable_thinking, model_args.model_name_or_path)
    # rollouts are rendered as the judge was trained and as `patarm judge` will prompt it
    args.chat_template_kwargs = {"enable_thinking": data.enable_thinking, **(args.chat_template_kwargs or {})}
    truncated = 0
    if data.max_prompt_length:
        rows, truncated = truncate_judge_rows(rows, tokenizer, data.max_prompt_length)
    logger.info("GRPO data: %s judge rows, %s prompts truncated; %s", len(rows), truncated, manifest)
    rewards = PairRewards(template, data.margin, kind=data.reward, label_threshold=data.label_threshold)
    trainer = PaTaRMGRPOTrainer(
        model=model, args=args, reward_funcs=rewards.reward_funcs() + extra,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer, peft_config=get_peft_config(model_args), callbacks=[JsonlMetricsCallback()],
    )
    trainer.add_callback(ScoreHistogramCallback(rewards, trainer))
    if truncated:  # logged once training began: earlier, TensorBoard would open a writer in the working directory
        trainer.add_callback(LogAtTrainBegin(trainer, {"data/truncated_prompts": float(truncated)}))
    train_and_save(trainer, "grpo", data, args, model_args)
    return trainer

