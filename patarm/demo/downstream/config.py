"""The options of `patarm downstream`: every size of the run is one of these fields (a config key or a flag).
The defaults are the CPU run; `patarm/demo/configs/downstream-small.yaml` is the seconds-long test version
and `configs/downstream/qwen3-8b.yaml` the paper-sized one."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from patarm.config import RunArguments

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"  # patarm/demo/configs
REWARD_CHOICES = ("judge", "bt", "rule")


def _path(help_text: str) -> dict:
    return {"path": "input", "help": help_text}


@dataclass
class DownstreamArguments(RunArguments):
    """The downstream RLHF loop: a policy trained with GRPO on the judge, a BT reward model and the rule verifier."""

    run_dir: str = field(default="runs/downstream", metadata={"help": "the run folder for every artefact"})
    rewards: list[str] = field(default_factory=lambda: list(REWARD_CHOICES), metadata={
        "help": "the rewards to train a policy on, one GRPO run each: judge (PaTaRM, served), bt (scalar), rule (the "
                "synthetic task's verifier, or the IFEval checkers on prompts with an `ifeval_row` column)"})
    seed: int = field(default=0, metadata={"help": "seed of the policy, its training and the evaluation sampling"})
    # --- the reward models
    judge_run: str = field(default="runs/quickstart", metadata=_path(
        "the quickstart run whose judge (export/) is served, whose training pairs (prep/pointwise/pairs.jsonl) "
        "train the BT model, and whose held-out pairs (prep/heldout/pairs.jsonl) measure both"))
    judge_model: str | None = field(default=None, metadata=_path("the judge to serve (default: {judge_run}/export)"))
    judge_url: str | None = field(default=None, metadata={
        "help": "a running `patarm serve` to use instead of starting one (required with several processes)"})
    judge_serve_args: list[str] = field(default_factory=lambda: ["--max_batch", "64"], metadata={
        "help": "extra `patarm serve` flags for the judge server this run starts"})
    judge_invalid: float | None = field(default=None, metadata={
        "help": "reward for a response the judge could not score (default: none, left out of the advantages)"})
    bt_model: str | None = field(default=None, metadata=_path(
        "a trained BT reward model folder (default: trained into {run_dir}/bt on the judge's training pairs)"))
    bt_pairs: str | None = field(default=None, metadata=_path(
        "the pairs the BT model trains on (default: the judge's SFT pairs, {judge_run}/prep/pointwise/pairs.jsonl)"))
    bt_max_pairs: int | None = field(default=6400, metadata={
        "help": "train the BT model on at most this many of the judge's pairs (its loss is ~0 long before 6,400)"})
    bt_config: str = field(default=str(CONFIG_DIR / "downstream-bt.yaml"), metadata=_path(
        "the `patarm bt` config of the BT reward model"))
    bt_facts: list[str] = field(default_factory=list, metadata={
        "help": "facts the BT model reads after each response (`patarm bt --facts`; text-counts: what a "
                "`pointwise-counts` judge is told), in training and as a reward"})
    score_with: list[str] = field(default_factory=lambda: ["judge", "bt"], metadata={
        "help": "reward models that score every policy's held-out responses (next to the verified measures)"})
    # --- the synthetic task (CPU)
    kinds: list[str] = field(default_factory=lambda: ["lowercase", "uppercase"], metadata={
        "help": "instruction kinds of the bundled synthetic task (patarm.demo.synthetic)"})
    task_pool: int = field(default=4000, metadata={"help": "synthetic pairs drawn for the policy's prompts"})
    task_seed: int = field(default=1, metadata={"help": "seed of the policy's task (the quickstart judge used 0)"})
    heldout_share: float = field(default=0.25, metadata={"help": "share of distinct prompt texts held out"})
    heldout_prompts: int = field(default=64, metadata={"help": "held-out prompts measured (at most)"})
    # --- task files (the paper-sized run)
    train_prompts_file: str | None = field(default=None, metadata=_path(
        "RL prompts instead of the synthetic task: jsonl of {\"prompt\": text or messages} (e.g. the RLCF set)"))
    ifeval_file: str | None = field(default=None, metadata=_path(
        "held-out IFEval items: input_data.jsonl, or a hub data set id such as google/IFEval"))
    infobench_file: str | None = field(default=None, metadata=_path(
        "held-out InFoBench items (instruction, input, decomposed_questions): jsonl or a hub id such as "
        "kqsong/InFoBench"))
    infobench_evaluator: str | None = field(default=None, metadata={
        "help": "the model answering InFoBench's decomposed questions (a model spec, vllm:PATH or http(s)://...#NAME)"})
    # --- the policy
    policy_model: str = field(default="tiny:hidden_size=128,num_layers=2,vocab_size=512", metadata=_path(
        "the policy's starting model (a model spec; `tiny:...` builds a small Qwen3 from the SFT corpus)"))
    policy_sft: bool = field(default=True, metadata={"help": "SFT the policy on the task first (synthetic task only)"})
    policy_sft_examples: int = field(default=8000, metadata={"help": "SFT conversations for the policy"})
    sft_violation_rate: float = field(default=0.5, metadata={
        "help": "share of the policy's SFT responses that break the instruction (the pair's rejected response)"})
    policy_sft_config: str = field(default=str(CONFIG_DIR / "downstream-sft.yaml"), metadata=_path(
        "the `patarm sft` config of the policy's SFT"))
    # --- GRPO and measurement
    grpo_config: str = field(default=str(CONFIG_DIR / "downstream-grpo.yaml"), metadata=_path(
        "TRL GRPOConfig keys of the policy's GRPO runs (YAML)"))
    grpo_settings: dict | None = field(default=None, metadata={"help": (
        "TRL GRPOConfig fields set over `grpo_config`'s, for every reward's run alike (a mapping; on the command line "
        "key=value pairs or JSON, e.g. `mask_truncated_completions=true`): an ablation of the policy's GRPO without a "
        "copy of its config; also the speed switches `shared_prefix_loss`, `shared_prefix_rollouts`, "
        "`rollout_cast_once` (patarm.train.grpo.SpeedGRPOConfig)")})
    grpo_steps: int = field(default=100, metadata={"help": "GRPO steps per reward"})
    rl_prompts: int = field(default=1000, metadata={"help": "RL prompts (rows; GRPO cycles through them)"})
    eval_every: int = field(default=25, metadata={"help": "measure held-out accuracy every N GRPO steps (0: only "
                                                           "before and after)"})
    eval_every_prompts: int = field(default=0, metadata={"help": (
        "the measurements every `eval_every` steps take the first N held-out prompts, the same ones each time, and "
        "the starting policy is measured on them too before the first step, so the curve compares like with like "
        "(0: all held-out prompts; the start and the end are always measured on all)")})
    eval_samples: int = field(default=4, metadata={"help": "sampled responses per held-out prompt (plus one greedy)"})
    eval_temperature: float = field(default=1.0, metadata={"help": "temperature of the sampled held-out responses"})
    eval_max_new_tokens: int = field(default=48, metadata={"help": "longest held-out response (tokens)"})
    enable_thinking: bool = field(default=True, metadata={"help": (
        "Qwen3's chat-template switch for the policy's prompts, in GRPO and measurement alike: true lets the policy "
        "open its answer with its own (empty) think block, as the tiny policy's SFT taught it; false puts one into "
        "the prompt (Qwen3's non-thinking mode). A leading think block is never part of the answer that is scored")})
    eval_backend: str = field(default="hf", metadata={"help": "generation for the before/after measurements",
                                                      "choices": ["hf", "vllm"]})

    def __post_init__(self) -> None:
        bad = [r for r in self.rewards + self.score_with if r not in REWARD_CHOICES]
        if bad or not self.rewards:
            raise ValueError(f"--rewards / --score_with: {bad or 'none given'}; choose from {list(REWARD_CHOICES)}")
        if not 0.0 <= self.sft_violation_rate <= 1.0 or not 0.0 < self.heldout_share < 1.0:
            raise ValueError("--sft_violation_rate must be in [0, 1] and --heldout_share in (0, 1)")
        if self.grpo_settings:  # at the start, not when the first GRPO stage reads them after minutes of work
            import dataclasses

            from patarm.config import nearest
            from patarm.train.grpo import SpeedGRPOConfig

            fields = [f.name for f in dataclasses.fields(SpeedGRPOConfig)]
            for key in self.grpo_settings:
                if key not in fields:
                    raise ValueError(f"--grpo_settings: {key!r} is not a TRL GRPOConfig field (nor a speed switch of "
                                     f"patarm.train.grpo.SpeedGRPOConfig){nearest(key, fields)}")
        for name in ("task_pool", "heldout_prompts", "policy_sft_examples", "grpo_steps", "rl_prompts"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be > 0, got {getattr(self, name)}")
        if self.eval_every < 0 or self.eval_samples < 0 or self.eval_every_prompts < 0:
            raise ValueError("--eval_every, --eval_every_prompts and --eval_samples must be >= 0")
        if self.train_prompts_file and self.policy_sft:
            raise ValueError("--policy_sft trains on the synthetic task; with --train_prompts_file set "
                             "--policy_sft false (start from an instruction-tuned policy)")

    @property
    def synthetic(self) -> bool:
        return not self.train_prompts_file

    def bt_pairs_path(self) -> Path:
        return Path(self.bt_pairs) if self.bt_pairs else Path(self.judge_run) / "prep" / "pointwise" / "pairs.jsonl"

    def judge_path(self) -> str:
        return self.judge_model or str(Path(self.judge_run) / "export")
