"""The paper's downstream RLHF loop (§4.3) in miniature: a policy trained with TRL's GRPO three ways — reward
= the PaTaRM judge (served by `patarm serve`, called through the TRL adapter over HTTP), reward = a
Bradley–Terry reward model trained on the same pairs (`patarm bt`), reward = the rule verifier (the upper
bound) — and measured on held-out prompts by the rule verifier and IFEval's checker, before and after.

    patarm quickstart --run_dir runs/quickstart          # the judge (once)
    patarm downstream [--run_dir runs/downstream] [--config patarm/demo/configs/downstream-small.yaml]

Stages, each skipped when its output exists (a stopped run resumes; a GRPO run from its newest checkpoint):

    task/          the policy's prompts: SFT corpus, RL prompts, held-out items (split by prompt text)
    policy-sft/    a tiny Qwen3 SFT-trained on the task, some of whose answers break the instruction
    bt/            the BT reward model, on the judge's own training pairs (+ its held-out pair accuracy)
    eval/start.json   the starting policy measured (and the task's reference responses)
    grpo-<reward>/ plain `trl.GRPOTrainer` on that reward: metrics.jsonl (the trained reward and the rollouts'
                   verified accuracy per step), heldout.jsonl (held-out measures every few steps), result.json
    report.md, report.json, downstream_curves.png
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from patarm.demo.downstream import reward_models as rm
from patarm.demo.downstream.config import DownstreamArguments
from patarm.demo.downstream.eval import EvalSettings, Evaluator, brief, measure
from patarm.demo.downstream.rewards import REWARDS, Monitored, RuleReward, ScalarReward, served_judge
from patarm.demo.kit import Clock, stage_args, train_stage, trained
from patarm.io import read_json, read_jsonl, write_json, write_jsonl

logger = logging.getLogger("patarm.downstream")


def run(args: DownstreamArguments) -> dict[str, Any]:
    """Every stage into `args.run_dir`; returns the report (also written as report.json / report.md).
    Under `accelerate launch` every process trains; measuring, serving and reporting happen on the main one."""
    from accelerate import PartialState

    state = PartialState()
    out = Path(args.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    clock = Clock()  # every process trains, so none writes timings.json: the report holds the stages' seconds
    preflight(args, state.num_processes)
    with state.main_process_first():
        task = stage_task(args, out)
    clock.done("task", note=f"{task['sft']} SFT rows, {task['rl']} RL prompts, {task['heldout']} held-out prompts")
    policy = stage_policy_sft(args, out)
    clock.done("policy SFT", note=str(policy))
    bt = stage_bt(args, out) if {"bt"} & set(args.rewards + args.score_with) else None
    clock.done("BT reward model", note=f"{bt}" if bt else "not needed")
    main = state.is_main_process
    results: dict[str, Any] = {}
    earlier: dict[str, dict] = {}
    unlike: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        scorers = _scorers(args, out, bt, stack)
        items = read_jsonl(out / "task" / "heldout.jsonl")
        settings = EvalSettings(args.eval_samples, args.eval_temperature, args.eval_max_new_tokens, seed=args.seed,
                                enable_thinking=args.enable_thinking)
        evaluator = Evaluator(items, settings, scorers, _infobench_backend(args) if main else None)
        if main:
            results["start"] = stage_eval(args, out / "eval" / "start.json", policy, evaluator)
            if args.synthetic:
                results["reference"] = stage_reference(out / "eval" / "reference.json", items, evaluator, args)
            clock.done("start policy measured", note=brief(results["start"]))
        state.wait_for_everyone()
        for reward in args.rewards:
            results[f"grpo-{reward}"] = stage_grpo(args, out, reward, policy, scorers, evaluator, main)
            state.wait_for_everyone()
            clock.done(f"GRPO on {reward}", note=brief(results[f"grpo-{reward}"]))
        if main:  # arms an earlier invocation finished in this folder join the report (e.g. one arm a run on a CPU)
            earlier, unlike = earlier_arms(out, args.rewards, measurement_settings(args, policy, evaluator))
            results |= {f"grpo-{r}": result for r, result in earlier.items()}
    if not main:
        return {}
    arms = [r for r in REWARDS if r in args.rewards or r in earlier]  # the registry's order, whatever ran first
    report = {"policies": {k: {m: v.get(m) for m in ("greedy", "sampled", "ifeval_official")}
                           for k, v in results.items()},
              "examples": {k: v.get("examples", []) for k, v in results.items()},
              "curves": {r: _curves(out / f"grpo-{r}", results["start"]) for r in arms},
              "reward_models": (measured := rm.reward_model_accuracy(args, bt)),
              "reward_models_paired": rm.reward_models_paired(measured), "rewards": arms,
              "arms_earlier": list(earlier), "arms_unlike": unlike,
              "reward_models_length": rm.reward_models_by_length(measured, rm.heldout_pairs(args)),
              **dict(zip(("ifeval_change", "ifeval_between"), _ifeval_paired(args, out, arms))),
              "stage_seconds": clock.timings, "seconds": round(time.time() - clock.t0, 1), "args": vars(args)}
    from patarm.demo.downstream.report import write_downstream_report

    return report | {"paths": write_downstream_report(report, out)}


def preflight(args: DownstreamArguments, processes: int = 1) -> None:
    """Fail in a second, not after minutes of training, when an input the run needs is missing."""
    needs = set(args.rewards + args.score_with)
    if "judge" in needs and not args.judge_url and processes > 1:
        raise ValueError(f"{processes} processes: start the judge once (`patarm serve --model {args.judge_path()}`) "
                         "and pass --judge_url, so the processes share it")
    if "judge" in needs and not args.judge_url and not Path(args.judge_path()).exists():
        raise FileNotFoundError(f"judge {args.judge_path()} does not exist: build it with `patarm quickstart --run_dir "
                                f"{args.judge_run}`, or give --judge_model (a judge folder) or --judge_url")
    pairs = args.bt_pairs_path()
    if "bt" in needs and not args.bt_model and not pairs.is_file():
        raise FileNotFoundError(f"{pairs}: the judge's training pairs, which the BT model trains on, are missing: "
                                f"run `patarm quickstart --run_dir {args.judge_run}` first, or give --bt_model")
    if "rule" in args.rewards and not args.synthetic:
        rows = read_jsonl(args.train_prompts_file)
        if not rows or not any(rows[0].get(k) for k in ("constraint", "ifeval_row")):
            raise ValueError(f"{args.train_prompts_file}: --rewards rule needs a checker on every prompt row (a "
                             "`constraint` or an `ifeval_row` column, as `patarm downstream --recipe ifeval` writes); "
                             "with other prompts use judge and/or bt")


def stage_task(args: DownstreamArguments, out: Path) -> dict[str, int]:
    """task/: sft.jsonl, rl.jsonl, heldout.jsonl and manifest.json (the counts)."""
    folder = out / "task"
    if (folder / "manifest.json").is_file():
        return read_json(folder / "manifest.json")
    from patarm.demo.downstream import task as T

    if args.synthetic:
        train, items = T.synthetic_split(args.task_pool, args.task_seed, args.kinds, args.heldout_share,
                                         args.heldout_prompts)
        sft, counts = T.policy_sft_rows(train, args.policy_sft_examples, args.sft_violation_rate, args.seed)
        rl = T.rl_rows(train, args.rl_prompts, offset=args.policy_sft_examples)
        manifest = {"sft": len(sft), "sft_responses": counts, "training_pairs": len(train)}
    else:
        sft, rl = [], T.prompts_from_file(args.train_prompts_file, args.rl_prompts)
        items = []
        if args.ifeval_file:
            items += T.ifeval_items(_local(args.ifeval_file, folder / "ifeval-source.jsonl"), args.heldout_prompts)
        if args.infobench_file:
            items += T.infobench_items(_local(args.infobench_file, folder / "infobench-source.jsonl"),
                                       args.heldout_prompts)
        manifest = {"sft": 0}
    if not items:
        raise ValueError("no held-out items: use the synthetic task or give --ifeval_file / --infobench_file")
    write_jsonl(sft, folder / "sft.jsonl")
    write_jsonl(rl, folder / "rl.jsonl")
    write_jsonl(items, folder / "heldout.jsonl")
    manifest |= {"rl": len(rl), "heldout": len(items)}
    write_json(manifest, folder / "manifest.json")
    return manifest


def _local(spec: str, path: Path) -> str:
    """A local jsonl for a benchmark given as a file, or as a hub data set id (downloaded once into `path`)."""
    if Path(spec).is_file():
        return spec
    from datasets import load_dataset

    if not path.is_file():
        write_jsonl(list(load_dataset(spec, split="train")), path)
    return str(path)


def stage_policy_sft(args: DownstreamArguments, out: Path) -> str:
    """policy-sft/: the policy after SFT on the task (or the starting model itself with --policy_sft false)."""
    if not args.policy_sft:
        return args.policy_model
    folder = out / "policy-sft"
    if not trained(folder):
        train_stage("sft", stage_args("sft", args.policy_sft_config, out, "--train_files", out / "task" / "sft.jsonl",
                                      "--output_dir", folder, "--model_name_or_path", args.policy_model,
                                      "--seed", args.seed))
    return str(folder)


def stage_bt(args: DownstreamArguments, out: Path) -> str:
    """bt/: the BT reward model on the judge's SFT pairs (or --bt_model), with its held-out pair accuracy."""
    if args.bt_model:
        return args.bt_model
    folder = out / "bt"
    if trained(folder):
        from patarm.models.settings import read_run_config

        made_with = (read_run_config(folder).get("data") or {}).get("facts") or []
        if made_with != list(args.bt_facts):
            raise ValueError(f"{folder}: this BT model was trained with facts {made_with}, this run asks for "
                             f"{list(args.bt_facts)}; use another --run_dir, or delete {folder}")
    else:
        flags = ["--train_file", args.bt_pairs_path(), "--output_dir", folder, "--seed", args.seed,
                 *(["--facts", *args.bt_facts] if args.bt_facts else [])]
        train_stage("bt", stage_args("bt", args.bt_config, out, *flags,
                                     *(["--max_pairs", args.bt_max_pairs] if args.bt_max_pairs else [])))
    return str(folder)


def _scorers(args: DownstreamArguments, out: Path, bt: str | None, stack: contextlib.ExitStack) -> dict[str, Any]:
    """Reward functions by name; the judge server starts only when the judge is first called."""
    scorers: dict[str, Any] = {"rule": RuleReward()} if args.synthetic or "rule" in args.rewards else {}
    if bt:
        scorers["bt"] = ScalarReward(bt)
    if "judge" in args.rewards + args.score_with:
        def connect() -> Any:
            from patarm.serve.adapters.trl import JudgeReward

            dtype = getattr(args, "dtype", None)  # a recipe that judges in one dtype serves the judge in it too
            extra = [*args.judge_serve_args, *(["--dtype", dtype] if dtype and "--dtype" not in
                                                args.judge_serve_args else [])]
            url = args.judge_url or stack.enter_context(served_judge(args.judge_path(), out / "serve.log", extra))
            judge = JudgeReward(url, name="judge", invalid=args.judge_invalid)
            stack.callback(judge.close)
            return judge

        scorers["judge"] = Lazy("judge", connect)
    return scorers


class Lazy:
    """A reward function built on its first call (so a resumed run starts no server it does not need)."""

    def __init__(self, name: str, build: Any):
        self.__name__, self._build, self._fn = name, build, None

    def __call__(self, *a: Any, **kw: Any) -> Any:
        if self._fn is None:
            self._fn = self._build()
        return self._fn(*a, **kw)


def _infobench_backend(args: DownstreamArguments) -> Any:
    if not args.infobench_evaluator:
        return None
    from patarm.backends import GenerationOptions, make_backend

    return make_backend(args.infobench_evaluator, GenerationOptions(max_new_tokens=16, temperature=0.0))


def measurement_settings(args: DownstreamArguments, model_path: str, evaluator: Evaluator) -> dict[str, Any]:
    """What decides a measurement's texts (not how fast they come: the batch size is left out). A model inside the
    run folder is named relative to it, so a run folder moved elsewhere still matches its own measurements."""
    s = evaluator.settings
    model = Path(model_path)
    if model.exists() and model.resolve().is_relative_to(Path(args.run_dir).resolve()):
        model_path = "{run_dir}/" + model.resolve().relative_to(Path(args.run_dir).resolve()).as_posix()
    return {"model": str(model_path), "items": len(evaluator.items), "dtype": getattr(args, "dtype", None),
            "backend": args.eval_backend, "samples": s.samples, "temperature": s.temperature if s.samples else None,
            "max_new_tokens": s.max_new_tokens, "enable_thinking": s.enable_thinking}


def stage_eval(args: DownstreamArguments, path: Path, model_path: str, evaluator: Evaluator) -> dict[str, Any]:
    """A saved policy measured on the held-out items (cached in `path`, with the settings it was measured under;
    a cached measurement taken under other settings is an error, not reused)."""
    settings = measurement_settings(args, model_path, evaluator)
    if path.is_file():
        result = read_json(path)
        saved = result.get("settings")  # files written before settings were recorded are reused as they are
        if saved is not None and saved != settings:
            differ = {k: (saved.get(k), settings.get(k)) for k in settings if saved.get(k) != settings.get(k)}
            said = ", ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in differ.items())
            raise ValueError(f"{path}: measured under other settings ({said}); delete the file to measure again, "
                             "or run in another --run_dir")
        return result
    result = evaluator.evaluate_folder(model_path, args.eval_backend, args.score_with, getattr(args, "dtype", None))
    return save_result(args, result | {"settings": settings}, path)


def save_result(args: DownstreamArguments, result: dict[str, Any], path: Path) -> dict[str, Any]:
    """Write a measurement to `path`. Greedy responses to IFEval's own prompts also go to
    `<name>-ifeval-responses.jsonl` ({prompt, response}), scored by the official scorer exactly as
    `patarm verify ifeval --input IFEVAL --responses FILE` scores them (`ifeval_official`: percent)."""
    responses = result.pop("greedy_responses", None)
    if responses:
        from patarm.verify.ifeval import evaluate

        file = path.with_name(f"{path.stem}-ifeval-responses.jsonl")
        write_jsonl(responses, file)
        source = _local(args.ifeval_file, Path(args.run_dir) / "task" / "ifeval-source.jsonl")
        result["ifeval_official"] = evaluate(source, file)[0]
    write_json(result, path)
    return result


# arms compared with each other on the same prompts: (arm, against) — the paper's claim is the judge over a scalar RM
ARM_COMPARISONS = (("judge", "bt"),)


def earlier_arms(out: Path, rewards: list[str], settings: dict[str, Any]) -> tuple[dict[str, dict], dict[str, str]]:
    """(arms, unlike): the policy arms an earlier invocation finished in `out` (`grpo-<reward>/result.json`, a
    reward other than `rewards`), read back so that a report gathers every arm of the folder — and those measured
    under other settings than `settings` (the start's, the model aside), left out with the reason. A result written
    before measurements recorded their settings joins as it is."""
    arms, unlike = {}, {}
    now = {k: v for k, v in settings.items() if k != "model"}
    for reward in REWARDS:
        path = out / f"grpo-{reward}" / "result.json"
        if reward in rewards or not path.is_file():
            continue
        result = read_json(path)
        saved = {k: v for k, v in (result.get("settings") or {}).items() if k != "model"}
        if saved and saved != now:
            unlike[reward] = ", ".join(f"{k} {saved.get(k)!r} there, {now.get(k)!r} now" for k in now
                                       if saved.get(k) != now.get(k))
            logger.warning("%s: measured under other settings (%s); left out of this report", path, unlike[reward])
            continue
        arms[reward] = result
    return arms, unlike


def _ifeval_paired(args: DownstreamArguments, out: Path, arms: list[str]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(change, between), each response file scored once by the official scorer and paired on the same prompts
    (`patarm.verify.ifeval.paired_change`): per reward, its end policy against the start; per `ARM_COMPARISONS`
    pair, `"<arm> vs <against>"`, the arm's end policy against the other's, over the rewards `arms`. {} where a
    side's responses are missing."""
    files = {"start": out / "eval" / "start-ifeval-responses.jsonl",
             **{r: out / f"grpo-{r}" / "result-ifeval-responses.jsonl" for r in arms}}
    files = {name: f for name, f in files.items() if f.is_file()}
    if len(files) < 2:
        return {}, {}
    from patarm.verify.ifeval import evaluate, paired_change

    source = _local(args.ifeval_file, Path(args.run_dir) / "task" / "ifeval-source.jsonl")
    scored = {name: evaluate(source, f)[1] for name, f in files.items()}
    change = ({r: paired_change(scored["start"], scored[r]) for r in arms if r in scored}
              if "start" in scored else {})
    between = {f"{a} vs {b}": paired_change(scored[b], scored[a]) for a, b in ARM_COMPARISONS
               if a in scored and b in scored}
    return change, between


def stage_reference(path: Path, items: list[dict], evaluator: Evaluator, args: DownstreamArguments,
                    ) -> dict[str, Any]:
    """The task's own chosen responses measured (the most each verified measure can give on these prompts),
    and scored by the reward models."""
    if not path.is_file():
        scorers = {n: evaluator.scorers[n] for n in args.score_with if n in evaluator.scorers}
        write_json({"greedy": measure([(item, item["reference"]) for item in items], scorers)}, path)
    return read_json(path)


def stage_grpo(args: DownstreamArguments, out: Path, reward: str, policy: str, scorers: dict[str, Any],
               evaluator: Evaluator, main: bool = True) -> dict[str, Any]:
    """grpo-<reward>/: plain TRL GRPO of the policy on one reward, then the trained policy measured."""
    from patarm.demo.downstream.train import train_policy
    from patarm.train.common import complete_checkpoints

    folder = out / f"grpo-{reward}"
    if (folder / "result.json").is_file():
        return read_json(folder / "result.json") if main else {}
    if main and folder.exists() and not trained(folder) and not complete_checkpoints(folder):
        shutil.rmtree(folder)  # stopped before its first checkpoint: starts over (its metrics would be mixed)
    from accelerate import PartialState

    PartialState().wait_for_everyone()
    if not trained(folder):  # else only its measurement was missing
        train_policy(args, out, folder, policy, Monitored(scorers[reward]), evaluator, [reward])
    if not main:
        return {}
    return save_result(args, evaluator.evaluate_folder(str(folder), args.eval_backend, args.score_with,
                                                       getattr(args, "dtype", None))
                       | {"settings": measurement_settings(args, str(folder), evaluator)}, folder / "result.json")


def _curves(folder: Path, start: dict[str, Any]) -> dict[str, list]:
    """Per step: the trained reward, the rollouts' verified accuracy, the share of them cut at the completion limit
    and their mean length in tokens (TRL's `completions/*`); per measurement: held-out measures."""
    steps = []
    for m in read_jsonl(folder / "metrics.jsonl") if (folder / "metrics.jsonl").is_file() else []:
        keys = [k for k in m if k.startswith("rewards/") and k.endswith("/mean")]
        if keys:  # a step where the reward scored no rollout (None) still has its rollouts' verified accuracy
            steps.append({"step": m["step"], "reward": m[keys[0]], "verified": m.get("verified/accuracy"),
                          "clipped": m.get("completions/clipped_ratio"), "tokens": m.get("completions/mean_length")})
    heldout = [{"step": 0, **{k: start[k] for k in ("greedy", "sampled") if k in start}}]
    rows = read_jsonl(folder / "heldout.jsonl") if (folder / "heldout.jsonl").is_file() else []
    heldout += [r for r in rows if not r.get("subset")]
    subset = [r for r in rows if r.get("subset")]  # the first N held-out prompts (eval_every_prompts), own curve
    if (folder / "result.json").is_file():
        final = read_json(folder / "result.json")
        heldout.append({"step": steps[-1]["step"] if steps else None,
                        **{k: final[k] for k in ("greedy", "sampled") if k in final}})
    return {"steps": steps, "heldout": heldout} | ({"heldout_subset": subset} if subset else {})
