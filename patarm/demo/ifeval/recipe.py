"""The paper's downstream claim with a real policy: SmolLM2-135M-Instruct trained by GRPO on verifiable instruction
prompts, rewarded by a PaTaRM judge, a Bradley-Terry model or the IFEval checkers, measured on the official IFEval.

    patarm downstream --recipe ifeval [--config more.yaml] [--key value ...]
        [--until prompts|start|pairs|judge|reward_models|all]

Stages into one run folder, each skipped when its output exists (a stopped run resumes):

    prompts/         verifiable prompts: Alpaca instructions + 1-3 IFEval-registry constraints, train / dev by
                     instruction, manifest (`patarm.demo.ifeval.prompts`)
    task/            the downstream loop's RL prompts (the first `rl_prompts` train prompts) and held-out items
                     (IFEval's own prompts, `heldout_prompts` of the 541)
    eval/start.json  the starting policy on IFEval: greedy, its chat template; `start-ifeval-responses.jsonl` is
                     scored by the official scorer (`ifeval_official`: the four figures, as `patarm verify ifeval`)
    prep/pairs/      the policy's sampled responses to `pair_prompts` train prompts (taken from the end of the
                     train list, apart from the RL prompts) and `dev_pair_prompts` dev prompts, checked constraint
                     by constraint; one pair per prompt (more constraints followed = chosen; `pairs_per_prompt`
                     for more) (`pairs.py`)
    prep/pointwise/  the checker-backed teacher's judgments of the first `sft_pairs` pairs (`teacher.py`) → sft/
    prep/rl/         the next `rl_pool` pairs, rejection-sampled with the SFT judge → grpo/ (GRPO-PAR) → export/
    eval/judge_pairs.json  the judge's accuracy on the dev pairs (prep/heldout/pairs.jsonl), each pair's outcome, its
                     constraint lines against the checkers; by its P(pass) per line (`judge_readout`); voting@k with
                     `judge_vote_k` (`judge_pairs_sft.json`: the SFT judge)
    prep/bt/pairs.jsonl    every pair the judge trained on, which the BT model trains on (same base model)
    eval/reward_models_paired.json  (`--until reward_models`) each judge against BT on the same dev pairs (McNemar)
    eval/reward_models_length.json  each model's dev-pair accuracy where the chosen side is longer / shorter
    then the downstream loop (`patarm.demo.downstream.loop`): bt/, grpo-<reward>/ per reward (plain TRL
    GRPOTrainer; IFEval every `eval_every` steps), report.md, report.json, downstream_curves.png

`--judge_model RUN/export --bt_model RUN/bt` reuse another run's reward models (the judge stages are then skipped).
Every size is a field below (the CPU default: `patarm/demo/configs/ifeval-recipe.yaml`, read first; the GPU
sizes: `configs/downstream/ifeval-qwen3.yaml`). `--until` stops after a stage (e.g. `start`: only measure;
`reward_models`: the judge and the BT model trained on the same pairs, both measured on the dev pairs). The stages
that build reward models (`pairs`, `judge`, `reward_models`) do not measure the start policy: nothing there reads it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patarm.demo.downstream.config import CONFIG_DIR, DownstreamArguments
from patarm.demo.kit import Clock, step_done, write_step
from patarm.io import read_json, read_jsonl, write_json, write_jsonl

DEFAULT_CONFIG = CONFIG_DIR / "ifeval-recipe.yaml"
UNTIL = ("prompts", "start", "pairs", "judge", "reward_models", "all")
REWARD_MODEL_STAGES = ("pairs", "judge", "reward_models")  # they stop before the policy: its start is not measured
logger = logging.getLogger("patarm.downstream")


def _input(help_text: str) -> dict:
    return {"path": "input", "help": help_text}


@dataclass
class IFEvalArguments(DownstreamArguments):
    """The IFEval recipe: the downstream loop's options (policy, rewards, GRPO, measurement) plus the prompts, the
    pairs and the judge trained here."""

    run_dir: str = field(default="runs/downstream-ifeval", metadata={"help": "the run folder for every artefact"})
    # the loop's options, with this recipe's defaults (the CPU config sets them too)
    rewards: list[str] = field(default_factory=lambda: ["judge", "bt", "rule"], metadata={
        "help": "the rewards to train a policy on, one GRPO run each: judge (PaTaRM, trained here, served), bt "
                "(scalar, same pairs and base), rule (the IFEval checkers: share of constraints followed)"})
    score_with: list[str] = field(default_factory=list, metadata={
        "help": "reward models that also score every policy's held-out responses (judge, bt; costly on a CPU)"})
    policy_model: str = field(default="smollm2", metadata=_input("the policy's starting model (a model spec)"))
    policy_sft: bool = field(default=False, metadata={"help": "must be false: the policy starts instruction-tuned"})
    ifeval_file: str | None = field(default="../shared/benchmarks/ifeval/input_data.jsonl", metadata=_input(
        "IFEval's input_data.jsonl (541 prompts): held out, never in the training prompts"))
    heldout_prompts: int = field(default=541, metadata={"help": "IFEval prompts measured (541: all)"})
    eval_samples: int = field(default=0, metadata={"help": "sampled responses per held-out prompt besides the "
                                                           "greedy one (IFEval's protocol: greedy only, 0)"})
    enable_thinking: bool = field(default=False, metadata={"help": "Qwen3's chat-template switch (off: answers "
                                                                   "without a reasoning block)"})
    grpo_config: str = field(default=str(CONFIG_DIR / "ifeval-policy-grpo.yaml"), metadata=_input(
        "TRL GRPOConfig keys of the policy's GRPO runs (YAML)"))
    bt_config: str = field(default=str(CONFIG_DIR / "ifeval-bt.yaml"), metadata=_input(
        "the `patarm bt` config of the BT reward model (its base model: the judge's)"))
    until: str = field(default="all", metadata={"help": "stop after this stage", "choices": list(UNTIL)})
    alpaca_file: str = field(default="../shared/benchmarks/alpaca/alpaca_5000.json", metadata=_input(
        "Alpaca instructions (JSON list of {instruction, input, output}); those with an input are skipped"))
    nltk_data: str | None = field(default="../shared/benchmarks/nltk_data", metadata=_input(
        "offline NLTK data for the IFEval checkers (tokenizers/punkt_tab/english); empty: $NLTK_DATA"))
    prompt_seed: int = field(default=0, metadata={"help": "seed of the constraints drawn per instruction"})
    min_constraints: int = field(default=1, metadata={"help": "fewest IFEval constraints per prompt"})
    max_constraints: int = field(default=3, metadata={"help": "most IFEval constraints per prompt"})
    dev_share: float = field(default=0.1, metadata={"help": "share of instructions in the dev split"})
    exclude_ids: list[str] = field(default_factory=list, metadata={
        "help": "IFEval instruction ids never drawn (e.g. length_constraints:number_sentences and "
                "change_case:capital_word_frequency, whose checkers need NLTK's punkt data)"})
    pair_prompts: int = field(default=400, metadata={"help": "train prompts whose sampled responses make pairs"})
    dev_pair_prompts: int = field(default=100, metadata={"help": "dev prompts whose sampled responses make the "
                                                                 "reward models' held-out pairs"})
    pair_samples: int = field(default=4, metadata={"help": "policy responses sampled per pair prompt"})
    pairs_per_prompt: int = field(default=1, metadata={
        "help": "pairs per prompt (train and dev): 1 = its best against its worst response; more (0: all) adds the "
                "other pairs of distinct samples that follow a different number of constraints, widest gap first"})
    sample_temperature: float = field(default=1.0, metadata={"help": "temperature of those samples"})
    sample_max_new_tokens: int = field(default=256, metadata={"help": "longest sampled response (tokens)"})
    sft_pairs: int = field(default=300, metadata={"help": "pairs whose teacher judgments make the judge's SFT "
                                                          "corpus (the first ones)"})
    rl_pool: int = field(default=80, metadata={"help": "the next pairs: the judge's RL pool (rejection-sampled)"})
    sft_min_margin: float = field(default=2.0, metadata={"help": "keep pairs whose teacher margin is > this "
                                                                 "(paper: 2)"})
    rl_rollouts: int = field(default=4, metadata={"help": "rejection sampling: SFT-judge rollouts per side"})
    rl_keep: list[float] = field(default_factory=lambda: [0.125, 0.75], metadata={
        "help": "rejection sampling: keep pairs whose share of right rollouts lies in [low, high]"})
    judge_base: str = field(default="smollm2", metadata={"help": "the judge's base model spec"})
    judge_template: str = field(default="pointwise-compact", metadata={
        "help": "the judge's prompt: pointwise-compact, or pointwise-counts (the response's words, sentences, "
                "highlights, ... counted as the checkers count them, stated after it: patarm.judge.facts; the "
                "teacher's evidence then cites those counts)", "choices": ["pointwise-compact", "pointwise-counts"]})
    judge_sft_config: str = field(default=str(CONFIG_DIR / "ifeval-judge-sft.yaml"), metadata=_input(
        "the `patarm sft` config of the judge"))
    judge_grpo_config: str = field(default=str(CONFIG_DIR / "ifeval-judge-grpo.yaml"), metadata=_input(
        "the `patarm grpo` (GRPO-PAR) config of the judge"))
    judge_grpo_steps: int = field(default=40, metadata={"help": "GRPO-PAR steps of the judge (0: SFT only)"})
    judge_vote_k: int = field(default=0, metadata={
        "help": "also measure the judge on the dev pairs by voting@k: each side's score the mean of k sampled "
                "judgments (the paper's §5.4), which breaks the ties of its greedy scores; 0: greedy only"})
    judge_vote_temperature: float = field(default=1.0, metadata={"help": "temperature of those judgments"})
    judge_readout: bool = field(default=True, metadata={
        "help": "also rank the dev pairs by the judge's P(pass) at each of its greedy constraint lines (the expected "
                "score, no sampling: one forward pass a line; `patarm.demo.ifeval.readout`)"})
    max_prompt_tokens: int = field(default=512, metadata={"help": "judge prompts are cut to this many tokens"})
    judge_max_new_tokens: int = field(default=96, metadata={"help": "judgment length limit"})
    batch_size: int = field(default=16, metadata={"help": "prompts per generation batch (samples, judging)"})
    dtype: str = field(default="float32", metadata={"help": "weights' dtype for measuring, sampling, judging and "
                       "serving the judge; auto: bfloat16 where the device has bf16 instructions (a CPU with "
                       "AMX/AVX512-BF16), else float32 (training stays fp32 / autocast as its stage configs say)",
                       "choices": ["auto", "float32", "bfloat16", "float16"]})
    device: str = field(default="cpu", metadata={"help": "where sampling and judging run: cpu or cuda"})

    def __post_init__(self) -> None:
        super().__post_init__()
        from patarm.train.common import auto_dtype

        self.dtype = auto_dtype(self.dtype, self.device)
        for name in ("pair_prompts", "dev_pair_prompts", "sft_pairs", "rl_rollouts", "max_prompt_tokens",
                     "judge_max_new_tokens", "batch_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be > 0, got {getattr(self, name)}")
        if self.judge_vote_k < 0:
            raise ValueError(f"--judge_vote_k must be >= 0 (0: greedy only), got {self.judge_vote_k}")
        if self.pairs_per_prompt < 0:
            raise ValueError(f"--pairs_per_prompt must be >= 0 (0: every pair that differs), got "
                             f"{self.pairs_per_prompt}")
        if self.policy_sft:
            raise ValueError("--policy_sft must be false in the ifeval recipe: the policy starts instruction-tuned")
        if not self.ifeval_file:
            raise ValueError("--ifeval_file is required: IFEval's input_data.jsonl (the held-out prompts)")
        if self.pair_samples < 2:
            raise ValueError(f"--pair_samples must be >= 2 (a pair needs two responses), got {self.pair_samples}")
        if len(self.rl_keep) != 2 or not 0 <= self.rl_keep[0] <= self.rl_keep[1] <= 1:
            raise ValueError(f"--rl_keep must be [low, high] with 0 <= low <= high <= 1, got {self.rl_keep}")
        # the judge, its pairs and the BT pairs live in this run folder: the downstream loop finds them by name
        out = Path(self.run_dir)
        self.judge_run = str(out)
        self.train_prompts_file = str(out / "prompts" / "train.jsonl")
        self.bt_pairs = self.bt_pairs or str(out / "prep" / "bt" / "pairs.jsonl")


def parse_args(argv: list[str]) -> IFEvalArguments:
    """The recipe's arguments: the CPU default config, then the given configs and flags."""
    from patarm.config import parse_stage

    (args,) = parse_stage((IFEvalArguments,), ["--config", str(DEFAULT_CONFIG), *argv],
                          prog="patarm downstream --recipe ifeval", description=__doc__)
    return args


def main(argv: list[str]) -> dict:
    return run(parse_args(argv))


def run(args: IFEvalArguments) -> dict[str, Any]:
    """Every stage up to `args.until` (skipping finished ones); returns the report (or what the last stage gave)."""
    from patarm.demo.downstream import loop
    from patarm.demo.downstream import reward_models as rm
    from patarm.verify.ifeval import _use_nltk_data

    _use_nltk_data(args.nltk_data or None)
    out = Path(args.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    clock = Clock(out)

    def stop(stage: str, result: Any, path: Path) -> dict[str, Any] | None:
        """The partial report when the run stops after `stage` (`--until`), else None."""
        done[stage] = result
        if args.until != stage:
            return None
        return done | {"seconds": round(time.time() - clock.t0, 1), "paths": {"report_md": str(path)}}

    done: dict[str, Any] = {}
    if (early := stop("prompts", stage_prompts(args, out, clock), out / "prompts" / "manifest.json")) is not None:
        return early
    loop.stage_task(args, out)
    if args.until in REWARD_MODEL_STAGES:
        logger.info("--until %s: the start policy is measured later, by the policy stages", args.until)
    elif (early := stop("start", stage_start(args, out, clock), out / "eval" / "start.json")) is not None:
        return early
    # the pairs feed the judge and the BT model; a run with the checkers' reward alone (`--rewards rule`), or with
    # reward models given (`--judge_model` / `--judge_url`, `--bt_model`), trains neither, unless it is asked to
    # stop at them
    needs = set(args.rewards + args.score_with)
    given = {"judge": args.judge_model or args.judge_url, "bt": args.bt_model}
    if all(given.get(r, True) for r in needs) and args.until not in REWARD_MODEL_STAGES:
        logger.info("rewards %s: no pairs, judge or BT model to train here (the checkers, or reward models given); "
                    "skipping those stages", sorted(needs))
        return loop.run(args)
    train, dev = stage_pairs(args, out, clock)
    if (early := stop("pairs", {"train": len(train), "dev": len(dev)}, out / "prep" / "pairs")) is not None:
        return early
    from patarm.demo.ifeval.judge import stage_judge

    if args.judge_model:  # a judge from another run, reused as it is (with --bt_model, the BT model too)
        logger.info("judge: %s (given; not trained here)", args.judge_model)
    elif "judge" not in needs and args.until not in ("judge", "reward_models"):
        logger.info("rewards %s: no PaTaRM judge needed; its stage is skipped", sorted(needs))
    elif (early := stop("judge", stage_judge(args, out, train, dev, clock), out / "eval" / "judge_pairs.json")):
        return early
    if args.until == "reward_models":  # the BT model on the same pairs and base, both measured on the dev pairs
        started = time.time()
        bt = loop.stage_bt(args, out)
        measured = rm.reward_model_accuracy(args, bt)
        clock.done("BT reward model", started, "; ".join(f"{name} {m['accuracy']:.3f} on {m.get('pairs', '?')} dev "
                                                         "pairs" for name, m in measured.items()))
        paired = rm.reward_models_paired(measured)
        for name, test in paired.items():
            logger.info("%s on the same %d dev pairs: %+.3f (%d / %d pairs only one of them gets right, p %.3g)",
                        name, test["pairs"], test["difference"], *list(test.values())[2:4], test["p_value"])
        by_length = rm.reward_models_by_length(measured, rm.heldout_pairs(args))
        for name, split in by_length.items():
            logger.info("%s: dev-pair accuracy %s where the chosen side is longer, %s where it is shorter "
                        "(Fisher p %s)", name, *(_share(split[k]) for k in ("chosen longer", "chosen shorter")),
                        "n/a" if split["p_value"] is None else f"{split['p_value']:.2g}")
        write_json(paired, out / "eval" / "reward_models_paired.json")
        write_json(by_length, out / "eval" / "reward_models_length.json")
        return stop("reward_models", {"accuracy": measured, "paired": paired, "by_length": by_length},  # type: ignore[return-value]
                    out / "eval" / "reward_models_paired.json")
    return loop.run(args)


def _share(half: dict) -> str:
    return "n/a" if half["accuracy"] is None else f"{half['accuracy']:.3f} ({half['pairs']} pairs)"


def stage_prompts(args: IFEvalArguments, out: Path, clock: Clock) -> dict[str, Any]:
    """prompts/: train.jsonl, dev.jsonl, manifest.json."""
    from patarm.demo.ifeval.prompts import PromptSettings, build_prompts

    folder = out / "prompts"
    if not step_done(folder):
        started = time.time()
        settings = PromptSettings(args.prompt_seed, args.min_constraints, args.max_constraints, args.dev_share,
                                  tuple(args.exclude_ids))
        train, dev, manifest = build_prompts(args.alpaca_file, args.ifeval_file, settings)
        write_step(folder, manifest, {"train.jsonl": train, "dev.jsonl": dev})
        clock.done("prompts", started, f"{len(train)} train, {len(dev)} dev prompts ({dict(manifest.dropped)} "
                                       "skipped)")
    return read_json(folder / "manifest.json")


def stage_start(args: IFEvalArguments, out: Path, clock: Clock) -> dict[str, Any]:
    """eval/start.json: the starting policy on the held-out IFEval prompts (loop.stage_eval, so the loop reuses it)."""
    from patarm.demo.downstream import loop
    from patarm.demo.downstream.eval import EvalSettings, Evaluator, brief

    path = out / "eval" / "start.json"
    if path.is_file():
        return read_json(path)
    started, cpu = time.time(), time.process_time()
    items = read_jsonl(out / "task" / "heldout.jsonl")
    settings = EvalSettings(args.eval_samples, args.eval_temperature, args.eval_max_new_tokens, args.batch_size,
                            args.seed, args.enable_thinking)
    result = loop.stage_eval(args, path, args.policy_model, Evaluator(items, settings))
    # wall time depends on what else runs; this process's CPU time (all its threads) is the machine-free figure
    result["seconds_per_prompt"] = round((time.time() - started) / len(items), 2)
    result["cpu_seconds_per_prompt"] = round((time.process_time() - cpu) / len(items), 2)
    write_json(result, path)
    clock.done("start policy measured", started, f"{brief(result)}; {result['seconds_per_prompt']} s per prompt "
                                                 f"({result['cpu_seconds_per_prompt']} CPU s); official: "
                                                 f"{result.get('ifeval_official')}")
    return result


def stage_pairs(args: IFEvalArguments, out: Path, clock: Clock) -> tuple[list, list]:
    """prep/pairs/: checker-labelled pairs of the policy's own samples (train.jsonl, dev.jsonl, manifest.json);
    the dev pairs also go to prep/heldout/pairs.jsonl, where the loop measures the BT model."""
    from patarm.data import PreferencePair, write_pairs
    from patarm.demo.ifeval.pairs import label_pairs, sample_responses

    folder = out / "prep" / "pairs"
    if step_done(folder):
        made_with = read_json(folder / "manifest.json").get("pairs_per_prompt", 1)
        if made_with != args.pairs_per_prompt:
            raise ValueError(f"{folder}: these pairs were made with pairs_per_prompt {made_with}, this run asks for "
                             f"{args.pairs_per_prompt}; use another --run_dir, or delete {folder} and the stages "
                             "built on it (prep/pointwise, prep/rl, sft, grpo, export, bt, eval/judge_pairs*)")
    else:
        started = time.time()
        train_rows = read_jsonl(out / "prompts" / "train.jsonl")
        rl_ids = {row.get("id") for row in read_jsonl(out / "task" / "rl.jsonl")}
        rows = {"train": train_rows[::-1][:args.pair_prompts],  # from the end: apart from the RL prompts
                "dev": read_jsonl(out / "prompts" / "dev.jsonl")[:args.dev_pair_prompts]}
        made, manifests = {}, {}
        drawn = sample_responses(args.policy_model, rows["train"] + rows["dev"], args.pair_samples,
                                 args.sample_max_new_tokens, args.sample_temperature, args.batch_size, args.seed,
                                 out / "prep" / "samples" / "cache.sqlite", args.dtype, args.device)
        responses = {"train": drawn[:len(rows["train"])], "dev": drawn[len(rows["train"]):]}
        for split, chosen in rows.items():
            made[split], records, manifests[split] = label_pairs(chosen, responses[split], args.pairs_per_prompt)
            write_jsonl(records, out / "prep" / "samples" / f"{split}.jsonl")
        manifest = manifests["train"]
        manifest.extra.update(dev=manifests["dev"].to_dict(), prompts_also_rl=sum(r["id"] in rl_ids
                                                                                   for r in rows["train"]))
        write_pairs(made["dev"], out / "prep" / "heldout" / "pairs.jsonl")
        write_step(folder, manifest, {"train.jsonl": [p.to_dict() for p in made["train"]],
                                      "dev.jsonl": [p.to_dict() for p in made["dev"]]})
        clock.done("pairs", started, f"{len(made['train'])} train pairs, {len(made['dev'])} dev pairs")
    return tuple([PreferencePair.from_dict(r) for r in read_jsonl(folder / name)]  # type: ignore[return-value]
                 for name in ("train.jsonl", "dev.jsonl"))
