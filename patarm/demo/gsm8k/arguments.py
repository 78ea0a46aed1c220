"""The GSM8K skill recipe's arguments: every size and choice of `patarm quickstart --recipe gsm8k-skill` (defaults in
`patarm/demo/configs/gsm8k-recipe.yaml`), checked when parsed; the recipe itself is `patarm.demo.gsm8k.recipe`."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from patarm.config import RunArguments, check_positive

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
DEFAULT_CONFIG = CONFIG_DIR / "gsm8k-recipe.yaml"
BINARY_HINT = ("with --teacher binary add --teacher_numbers as-written --teacher_issues_line false, or use "
               "--config patarm/demo/configs/gsm8k-binary.yaml")
ARMS = ("reference", "no-reference", "evidence")
# what each arm discloses to the judge: (the reference answer, the skill's arithmetic-check evidence)
DISCLOSES = {"reference": (True, False), "no-reference": (False, False), "evidence": (False, True)}
STAGES = ("base", "sft", "grpo")


@dataclass
class GSM8KArguments(RunArguments):
    """The GSM8K skill recipe: data, sizes and the stage configs."""

    run_dir: str = field(default="runs/gsm8k-skill", metadata={"help": "the run folder (one sub-folder per arm)"})
    data_dir: str = field(default="../shared/benchmarks/gsm8k", metadata={"path": "input", "help":
                          "folder with example_model_solutions.jsonl (4 models' GSM8K test solutions) and test.jsonl"})
    model: str = field(default="smollm2", metadata={"help": "the base model spec of the judge and of the BT baseline"})
    arms: list[str] = field(default_factory=lambda: list(ARMS), metadata={"help": "reference (the reference answer "
                            "mounted), no-reference, evidence (the arithmetic check disclosed, the reference not)"})
    teacher: str = field(default="graded", metadata={"help": "the SFT corpus' verifier teacher: graded (1-10 from "
                         "checkable evidence, docs/gsm8k-skill.md) or binary (9 / 2, the first recipe's)",
                         "choices": ["graded", "binary"]})
    skill: str = field(default="", metadata={"help": "the skill framing the judge prompt: empty = the teacher's "
                       "compact skill (gsm8k-judge-graded / gsm8k-judge), or a bank skill such as reward-judge"})
    rubric_mode: str = field(default="primary", metadata={"help": "primary (<eval> then <score>) or adaptive (a "
                             "sample-specific <rubric> first; graded teacher)", "choices": ["primary", "adaptive"]})
    teacher_numbers: str = field(default="as-written", metadata={"help": "graded teacher: state the answers and "
                                 "the last step as written (5,600 / 75.00) or canonical (5600 / 75), so that "
                                 "`correct` and `follows` are string equalities (the recipe config's default "
                                 "since 2026-12-06; ablation as-written)",
                                 "choices": ["as-written", "canonical"]})
    teacher_issues_line: bool = field(default=False, metadata={"help": "graded teacher: also state the count of "
                                      "issues as the last <eval> line (`issues :: 1`), so the score is a lookup "
                                      "from a stated number (the recipe config's default since 2026-12-06)"})
    evidence_agreement: bool = field(default=False, metadata={"help": "the evidence arm also discloses the skill's "
                                     "answer-agreement verifier over the problem's candidates (how many give each "
                                     "one's final answer), stated as `agreement :: k of n` and scored 2 + 2k − "
                                     "issues (the recipe config's default since 2026-12-07; false: the arithmetic "
                                     "check alone, as measured before)"})
    evidence_score_rule: bool = field(default=False, metadata={"help": "with evidence_agreement, the judge's system "
                                      "prompt also states the score rule its teacher follows (`agreement :: k of "
                                      "n`, `issues :: N`, score 2 + 2k − issues; the skill's procedure states "
                                      "only the rule without agreement, 7 − 3 × issues); the recipe config's "
                                      "default since 2026-12-07 #19; false: as measured before"})
    evidence_max_new_tokens: int | None = field(default=None, metadata={"help": "the evidence arm's judgment "
                                                "length limit with evidence_agreement (its line adds ~9 tokens); "
                                                "unset: max_new_tokens"})
    margin: str = field(default="graded", metadata={"help": "GRPO-PAR's f(δ): graded or constant (ablation)"})
    reward: str = field(default="par", metadata={"help": "GRPO reward: par, or label (ablation: +1/−1 per rollout "
                        "against the pair's label)", "choices": ["par", "label"]})
    sft_epochs: float | None = field(default=None, metadata={"help": "override the SFT config's num_train_epochs "
                                     "(the 'more SFT instead of GRPO' ablation)"})
    heldout_problems: int = field(default=100, metadata={"help": "problems held out for evaluation"})
    sft_problems: int = field(default=96, metadata={"help": "train problems (with a correct and an incorrect "
                              "solution) whose pairs make the SFT corpus"})
    rl_problems: int = field(default=16, metadata={"help": "further train problems whose pairs are the RL pool"})
    pairs_per_problem: int = field(default=1, metadata={"help": "(correct, incorrect) pairs drawn per problem"})
    follows_no_repeat: int = field(default=1, metadata={"help": "graded teacher: SFT rows whose judgment says `follows "
                                   ":: no` (a final answer that is not the last step's result, mostly decimals "
                                   "dropped: 32 of 800 rows at the CPU default) appear this many times; 1 = once"})
    sft_min_margin: float = field(default=2.0, metadata={"help": "the paper's SFT-corpus filter in the reference "
                                  "arm: keep pairs whose teacher margin (chosen − rejected score) is > this"})
    rule_sft_min_margin: float = field(
        default=-10.0,
        metadata={
            "help": "the same filter in the arms without the "
            "reference, whose graded teacher is the evidence-only rule: it separates only "
            "~21 % of pairs by > 2, so by default every pair is kept (the rule taught whole, "
            "as many rows as the reference arm)"
        },
    )
    rl_rollouts: int = field(default=4, metadata={"help": "rejection sampling: judge rollouts per response (n)"})
    rl_temperature: float | None = field(default=None, metadata={
        "help": "rejection sampling: the rollouts' sampling temperature; unset: the GRPO stage config's `temperature` "
                "(TRL's 1.0 where it sets none), so the band is read from the rollouts GRPO will draw (until "
                "2026-12-07 #21 always 1.0)"})
    rl_keep: list[float] = field(default_factory=lambda: [0.125, 0.75], metadata={
        "help": "rejection sampling: keep pairs whose share of right rollouts lies in [low, high]"})
    rl_keep_rewards: list[str] = field(default_factory=list, metadata={
        "help": "rejection sampling also keeps a pair outside rl_keep when these reward functions ('module:function', "
                "as GRPO's extra_rewards) score one side's rollouts unequally: GRPO has a non-zero advantage there "
                "where PAR alone may have none (e.g. the evidence check on a pair the judge already ranks right)"})
    sft_near_misses: int = field(default=0, metadata={
        "help": "add this many near-miss SFT rows, one per SFT problem: the teacher's judgment of a correct solution "
                "with its final answer made a near miss (2400 → 240, 2 → 27, 2 → 2.5, 13 → -13) — `correct :: "
                "fail`, `follows :: no`, both numbers stated (0: none; not yet measured: docs/gsm8k-skill.md)"})
    sft_unanimous: int = field(default=0, metadata={
        "help": "the evidence arm with evidence_agreement: add this many SFT rows, one per train problem whose "
                "candidates all give one final answer, judged by the teacher (`agreement :: 4 of 4`): the pairs' "
                "rows never state it (a pair's sides differ), and the judge scored it as 3 of 4 (0: none)"})
    rl_near_misses: int = field(default=0, metadata={
        "help": "add this many synthetic pairs to the RL pool, one per RL problem: a correct solution against the "
                "same solution with its final answer a near miss (2400 → 240, 2 → 27, 2 → 2.5, 13 → -13), the "
                "numbers the judge reads by their start; rejection sampling keeps those it gets wrong (0: none; "
                "measured on seed 1, not to use: with 80 GRPO-PAR says fail to every candidate, with 8 the slips "
                "change sides; docs/gsm8k-skill.md)"})
    grpo_steps: int = field(default=8, metadata={"help": "GRPO-PAR optimizer steps (0: no GRPO stage)"})
    grpo_epochs: float | None = field(default=None, metadata={"help": "at most this many passes of GRPO-PAR over "
                                      "the kept RL set (the paper: one epoch): the stage runs min(grpo_steps, "
                                      "ceil(grpo_epochs × kept pairs / pairs per step)) steps; unset: grpo_steps "
                                      "whatever the set's size (4 kept pairs and 40 steps are 10 passes)"})
    max_prompt_tokens: int = field(default=320, metadata={"help": "judge prompts are cut to this many tokens"})
    max_new_tokens: int = field(
        default=96,
        metadata={
            "help": "judgment length limit (evaluation, rejection "
            "sampling, GRPO's max_completion_length; SFT's max_length is max_prompt_tokens + this)"
        },
    )
    eval_batch_size: int = field(default=32, metadata={"help": "prompts per generation batch"})
    eval_dtype: str = field(default="auto", metadata={"help": "weights' dtype for judging and sampling; auto: "
                            "bfloat16 where the device has bf16 instructions (a CPU with AMX/AVX512-BF16), else "
                            "float32 (emulated bf16 is ~50x slower)"})
    judge_device: str = field(default="cpu", metadata={"help": "where judging and rejection sampling run: cpu, or "
                              "cuda (a GPU)"})
    bt_baseline: bool = field(default=True, metadata={"help": "train and evaluate the Bradley-Terry baseline (the "
                              "evidence arm has none of its own: BT reads the same response without the reference, "
                              "as in no-reference)"})
    vote_k: int = field(default=0, metadata={"help": "also judge with k sampled judgments per candidate (voting@1..k "
                        "and adaptive voting; k× the judge calls); 0: greedy only"})
    vote_stages: list[str] = field(default_factory=lambda: ["grpo"], metadata={"help": "stages judged with voting"})
    vote_temperature: float = field(default=1.0, metadata={"help": "sampling temperature of the voting judgments"})
    verdict_probability: bool = field(default=True, metadata={"help": "arms with the reference: also score each "
        "greedy judgment by the judge's P(pass) at its own `correct ::` with the scale (patarm.demo.gsm8k.verdict; "
        "one forward pass per candidate)"})
    sft_config: str = field(default="gsm8k-sft.yaml", metadata={"path": "input", "help": "the SFT stage config"})
    grpo_config: str = field(default="gsm8k-grpo.yaml", metadata={"path": "input", "help": "the GRPO stage config"})
    bt_config: str = field(default="gsm8k-bt.yaml", metadata={"path": "input", "help": "the BT stage config"})
    seed: int = field(default=0, metadata={"help": "seed of the split, the pairs, the models and the sampling"})
    grpo_seed: int | None = field(default=None, metadata={"help": "the GRPO stage's seed (default: seed); another "
                                  "value with reuse_sft runs GRPO again from the same SFT judge and RL set"})
    split_seed: int | None = field(default=None, metadata={"help": "seed of the held-out split (default: seed); "
                                   "the seeds mode keeps one split for every seed"})
    seeds: list[int] | None = field(default=None, metadata={"help": "run the recipe once per seed into "
                                    "{run_dir}/seed-<s>/ (same held-out problems) and report mean ± s.e."})
    reuse_sft: str = field(default="", metadata={"help": "a finished run folder of this recipe whose SFT judge (and "
                           "SFT corpus, RL set, base and SFT judgments) each arm links instead of redoing, where the "
                           "arguments that decide them are equal (patarm.demo.gsm8k.reuse): GRPO-only ablations"})
    ablation: str = field(default="", metadata={"help": "an ablation of the reference arm (its config in "
                          "patarm/demo/configs/gsm8k-ablations/ is read after the default), or all (every one, "
                          "then the table)"})

    def __post_init__(self) -> None:
        from patarm.demo.gsm8k.teacher import SKILL_OF

        check_positive(self, "heldout_problems", "sft_problems", "rl_problems", "pairs_per_problem", "rl_rollouts",
                       "max_prompt_tokens", "max_new_tokens", "eval_batch_size", "follows_no_repeat",
                       "evidence_max_new_tokens")
        counts = ("grpo_steps", "vote_k", "sft_near_misses", "rl_near_misses", "sft_unanimous")
        negative = [k for k in counts if getattr(self, k) < 0]
        if negative:
            raise ValueError(f"{', '.join(negative)} must be >= 0, got "
                             f"{', '.join(str(getattr(self, k)) for k in negative)}")
        if self.sft_unanimous and not ("evidence" in self.arms and self.evidence_agreement):
            raise ValueError(f"sft_unanimous {self.sft_unanimous} adds rows to the evidence arm with "
                             "evidence_agreement only: add evidence to --arms (with --evidence_agreement true), or "
                             "leave sft_unanimous at 0")
        if self.grpo_epochs is not None and not self.grpo_epochs > 0:
            raise ValueError(f"grpo_epochs must be > 0 (or left unset: grpo_steps steps), got {self.grpo_epochs}")
        if self.sft_epochs is not None and not self.sft_epochs > 0:
            raise ValueError(f"sft_epochs must be > 0 (or left unset: the SFT config's num_train_epochs), got "
                             f"{self.sft_epochs}")
        self.skill = self.skill or SKILL_OF[self.teacher]
        from patarm.train.common import auto_dtype

        self.eval_dtype = auto_dtype(self.eval_dtype, self.judge_device)
        if self.teacher_numbers != "as-written" and self.teacher != "graded":
            raise ValueError("teacher_numbers canonical (the recipe's default) needs teacher graded: the binary "
                             f"teacher states numbers as written — {BINARY_HINT}")
        if self.teacher_issues_line and self.teacher != "graded":
            raise ValueError(f"teacher_issues_line (on by default) needs teacher graded: the binary teacher counts no "
                             f"issues — {BINARY_HINT}")
        if self.rubric_mode == "adaptive" and self.teacher != "graded":
            raise ValueError("rubric_mode adaptive needs teacher graded (the binary teacher writes no <rubric>)")
        if "evidence" in self.arms and self.teacher != "graded":
            raise ValueError("the evidence arm needs teacher graded (its skill has the arithmetic-check verifier)")
        unknown = set(self.arms) - set(ARMS)
        if unknown or not self.arms:
            raise ValueError(f"arms: choose from {list(ARMS)}, got {self.arms}")
        if self.rl_temperature is not None and not self.rl_temperature > 0:
            raise ValueError(f"rl_temperature must be > 0 (or left unset: the GRPO config's temperature), got "
                             f"{self.rl_temperature}")
        if len(self.rl_keep) != 2 or not 0 <= self.rl_keep[0] <= self.rl_keep[1] <= 1:
            raise ValueError(f"rl_keep must be [low, high] with 0 <= low <= high <= 1, got {self.rl_keep}")
        if self.rl_keep_rewards:  # a bad entry fails here, not after the SFT stage that precedes the RL set
            from patarm.train.grpo import extra_reward_funcs

            extra_reward_funcs(self.rl_keep_rewards, "rl_keep_rewards")

    @property
    def rollout_temperature(self) -> float:
        """The rejection-sampling rollouts' temperature: `rl_temperature`, else the GRPO config's (1.0 unset)."""
        return rollout_temperature(self.rl_temperature, self.grpo_config)

    @property
    def agreement(self) -> str | None:
        """How the evidence arm discloses the answer agreement: None (not at all), `facts` (the verifier's evidence)
        or `rule` (also the score rule it enters, `evidence_score_rule`)."""
        if not self.evidence_agreement:
            return None
        return "rule" if self.evidence_score_rule else "facts"


def rollout_temperature(rl_temperature: float | None, grpo_config: str | None) -> float:
    """`rl_temperature` where set, else the `temperature` the GRPO stage config `grpo_config` samples at (TRL's
    default 1.0 where the file sets none or is not there)."""
    if rl_temperature is not None:
        return float(rl_temperature)
    import yaml

    path = Path(grpo_config) if grpo_config else None
    settings = (yaml.safe_load(path.read_text()) or {}) if path and path.is_file() else {}
    return float(settings.get("temperature", 1.0))


def argument_defaults() -> dict[str, Any]:
    """The recipe arguments' defaults, as a run's report would record them."""
    return {f.name: f.default if f.default is not MISSING else f.default_factory() for f in fields(GSM8KArguments)
            if f.default is not MISSING or f.default_factory is not MISSING}


def parse_args(argv: list[str]) -> GSM8KArguments:
    """The recipe's arguments: the CPU default config, the `--ablation`'s config, then the given configs and flags."""
    from patarm.config import parse_stage
    from patarm.demo.gsm8k import recipe
    from patarm.demo.gsm8k.ablations import inject

    (args,) = parse_stage((GSM8KArguments,), ["--config", str(DEFAULT_CONFIG), *inject(argv), *argv],
                          prog="patarm quickstart --recipe gsm8k-skill", description=recipe.__doc__)
    return args
