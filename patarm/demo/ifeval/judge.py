"""The IFEval recipe's PaTaRM judge, trained in the recipe's run folder exactly as `patarm sft | grpo | export` train
one: the checker-backed teacher's pointwise SFT corpus on the first `sft_pairs` pairs (margin filter), SFT, the RL set
rejection-sampled with the SFT judge on the next `rl_pool` pairs, GRPO-PAR, export; then its accuracy on the dev
pairs, and the BT model's training pairs (every pair the judge trained on).

The judge prompt is the bundled `judge_template` (`pointwise-compact`; `pointwise-counts` also states the response's
counts, `patarm.judge.facts`) rendered with the policy's prompt (which states its constraints) and the domain's
primary rubric — what `patarm serve` renders for each request of the TRL adapter — so
the judge is asked the same way in SFT, rejection sampling, GRPO, its own evaluation and as the served reward.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patarm.demo.kit import Clock, stage_args, step_done, train_stage, trained, write_step
from patarm.io import read_json, read_jsonl, write_json

logger = logging.getLogger("patarm.downstream")
if TYPE_CHECKING:
    from patarm.demo.ifeval.recipe import IFEvalArguments


def _renderer(args: IFEvalArguments, tokenizer_from: str | None) -> Any:
    """The judge prompt of one side (the template rendered with the pair's prompt, as `patarm serve` renders it),
    cut to `max_prompt_tokens` with the tokenizer of `tokenizer_from` (None: not cut, e.g. a tiny base that has
    no tokenizer before its SFT)."""
    from patarm.prep.corpus import template_prompt

    if tokenizer_from is None:
        return template_prompt
    from patarm.judge.truncate import truncate_messages
    from patarm.models import load_tokenizer, resolve_model

    tokenizer = load_tokenizer(resolve_model(tokenizer_from))
    return lambda pair, response, template: truncate_messages(template_prompt(pair, response, template), tokenizer,
                                                              args.max_prompt_tokens)[0]


def _judge_backend(args: IFEvalArguments, model: str, temperature: float, cache: Path) -> Any:
    from patarm.backends import GenerationOptions, make_backend

    spec = {"kind": "hf", "model": model, "dtype": args.dtype,
            **({} if args.device == "cpu" else {"device_map": args.device})}
    return make_backend(spec, GenerationOptions(max_new_tokens=args.judge_max_new_tokens, temperature=temperature,
                                                batch_size=args.batch_size), cache=cache, name=cache.parent.name)


def split_pool(train: list, sft_pairs: int, rl_pool: int) -> tuple[list, list]:
    """The first `sft_pairs` train pairs for SFT and the next `rl_pool` for the RL set. When the pairs stage gave
    fewer than both ask for (its yield depends on how often the policy's samples differ in constraints followed), the
    pairs there are shared in the same proportion, with a warning, rather than leaving the RL pool empty and the
    judge without its GRPO-PAR stage."""
    want = sft_pairs + rl_pool
    if len(train) >= want or not rl_pool:
        return train[:sft_pairs], train[sft_pairs:want]
    n_sft = min(sft_pairs, max(1, round(len(train) * sft_pairs / want))) if sft_pairs else 0
    logger.warning("the pairs stage gave %d train pairs, fewer than sft_pairs + rl_pool = %d + %d: %d for SFT and %d "
                   "for the RL pool (the same proportion); raise pair_prompts for more", len(train), sft_pairs,
                   rl_pool, n_sft, len(train) - n_sft)
    return train[:n_sft], train[n_sft:]


def sft_rows_and_pairs(pool: list, rows: list[dict], manifest: Any) -> tuple[list[dict], list]:
    """(the SFT rows less repeats, the pairs whose judgments made the corpus): every pair past the margin filter
    is the judge's, so the BT model trains on it, though its two rows may repeat rows of other pairs."""
    kept = {r["pair_id"] for r in rows}
    return _distinct_rows(rows, manifest), [p for p in pool if p.id in kept]


def _distinct_rows(rows: list[dict], manifest: Any) -> list[dict]:
    """The SFT rows less exact repeats (a response in several pairs of its prompt, `pairs_per_prompt` > 1, gets the
    same judge prompt and the same teacher judgment each time): counted as `duplicate_rows`."""
    seen, out = set(), []
    for row in rows:
        key = json.dumps(row["messages"], sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(row)
    manifest.extra.update(duplicate_rows=len(rows) - len(out), sft_rows=len(out))
    return out


def stage_judge(args: IFEvalArguments, out: Path, train: list, dev: list, clock: Clock) -> dict[str, Any]:
    """The PaTaRM judge: teacher SFT corpus → SFT → RL set → GRPO-PAR → export/, its dev-pair accuracy, and the BT
    pairs (every pair it trained on). Returns the judge's dev-pair accuracy."""
    from patarm.data import write_pairs
    from patarm.demo.ifeval.teacher import ConstraintTeacher
    from patarm.judge import load_template
    from patarm.models import parse_tiny_spec
    from patarm.prep.corpus import pointwise_corpus

    template = load_template(args.judge_template, rubric_mode="primary")
    sft_pool, rl_pool = split_pool(train, args.sft_pairs, args.rl_pool)
    folder = out / "prep" / "pointwise"
    if step_done(folder):
        made_with = read_json(folder / "manifest.json").get("judge_template", "pointwise-compact")
        if made_with != args.judge_template:
            raise ValueError(f"{folder}: the judge's SFT corpus was made with judge_template {made_with}, this run "
                             f"asks for {args.judge_template}; use another --run_dir (its prompts/, task/, prep/pairs/ "
                             "and eval/start.json can be copied there), or delete the judge's stages (prep/pointwise, "
                             "prep/rl, sft, grpo, export, eval/judge_pairs*)")
    else:
        started = time.time()
        base = None if parse_tiny_spec(args.judge_base) is not None else args.judge_base
        teacher = ConstraintTeacher(counts="text-counts" in template.facts)
        rows, manifest = pointwise_corpus(sft_pool, teacher, template, args.sft_min_margin,
                                          render=_renderer(args, base))
        manifest.extra["judge_template"] = args.judge_template
        if not rows:
            raise ValueError(f"the judge's SFT corpus is empty: no pair of {len(sft_pool)} has a teacher margin > "
                             f"{args.sft_min_margin} ({dict(manifest.dropped)}): raise pair_prompts or lower "
                             "sft_min_margin")
        rows, pairs = sft_rows_and_pairs(sft_pool, rows, manifest)
        write_step(folder, manifest, {"sft.jsonl": rows, "pairs.jsonl": [p.to_dict() for p in pairs]})
        clock.done("judge SFT corpus", started, f"{len(rows)} rows from {len(sft_pool)} pairs")
    if not trained(out / "sft"):
        started = time.time()
        length = args.max_prompt_tokens + args.judge_max_new_tokens + 16
        train_stage("sft", stage_args("sft", args.judge_sft_config, out, "--model_name_or_path", args.judge_base,
                                      "--train_files", folder / "sft.jsonl", "--output_dir", out / "sft", "--seed",
                                      args.seed, "--max_length", length))
        clock.done("judge SFT", started)
        (out / "eval" / "judge_pairs_sft.json").unlink(missing_ok=True)  # a new SFT judge: its old accuracy is stale
    final = out / "sft"
    if args.judge_grpo_steps and rl_pool:
        final = _judge_grpo(args, out, rl_pool, template, clock) or final
    if final != out / "sft":  # the SFT judge measured too: what GRPO-PAR changed
        judge_accuracy(args, out, dev, template, clock, stage="sft")
    if not trained(out / "export"):
        from patarm.export import export

        export(final, out / "export", overwrite=True)
        (out / "eval" / "judge_pairs.json").unlink(missing_ok=True)  # a new judge: its old accuracy is stale
    bt = Path(args.bt_pairs_path())
    if not bt.is_file():
        seen = read_jsonl(folder / "pairs.jsonl") + [p.to_dict() for p in rl_pool]
        write_pairs(seen, bt)
    return judge_accuracy(args, out, dev, template, clock)


def _judge_grpo(args: IFEvalArguments, out: Path, pool: list, template: Any, clock: Clock) -> Path | None:
    """prep/rl/ (rejection sampling with the SFT judge) and grpo/; None when the RL set came out empty."""
    from patarm.prep.corpus import rl_set

    folder = out / "prep" / "rl"
    render = _renderer(args, str(out / "sft"))
    if not step_done(folder):
        started = time.time()
        sampler = _judge_backend(args, str(out / "sft"), 1.0, folder / "cache.sqlite")
        kept, manifest = rl_set(pool, sampler, template, n=args.rl_rollouts, low=args.rl_keep[0],
                                high=args.rl_keep[1], seed=args.seed, render=render)
        sampler.cache.close()
        write_step(folder, manifest, {"pairs.jsonl": [p.to_dict() for p in kept]})
        clock.done("judge RL set", started, f"kept {len(kept)} of {len(pool)} pairs {dict(manifest.dropped)}")
    if not read_jsonl(folder / "pairs.jsonl"):
        logger.warning("the judge's RL set is empty (no pool pair in the kept band): the judge is the SFT one")
        return None
    if not trained(out / "grpo"):
        started = time.time()
        train_stage("grpo", stage_args("grpo", args.judge_grpo_config, out, "--model_name_or_path", out / "sft",
                                       "--train_file", folder / "pairs.jsonl", "--output_dir", out / "grpo",
                                       "--seed", args.seed, "--max_steps", args.judge_grpo_steps,
                                       "--judge_template", args.judge_template,
                                       "--max_prompt_length", args.max_prompt_tokens,
                                       "--max_completion_length", args.judge_max_new_tokens))
        clock.done("judge GRPO-PAR", started)
    return out / "grpo"


def judge_accuracy(args: IFEvalArguments, out: Path, dev: list, template: Any, clock: Clock,
                   stage: str = "export") -> dict[str, Any]:
    """eval/judge_pairs.json: the exported judge's greedy scores of both sides of every dev pair; accuracy = the
    chosen side scored strictly higher (a tie or an unreadable score is wrong), with its 95 % interval, the ties
    counted, and each pair's outcome (`right`). `stage="sft"`: the SFT judge, into eval/judge_pairs_sft.json (what
    GRPO-PAR changed)."""
    from patarm.eval.stats import mean_ci
    from patarm.judge import parse_judgment

    name = "judge_pairs" if stage == "export" else f"judge_pairs_{stage}"
    path = out / "eval" / f"{name}.json"
    if path.is_file() and "right" in (cached := read_json(path)):  # one written before `right`: its texts are cached
        added = False
        if args.judge_vote_k and cached.get("voting", {}).get("k") != args.judge_vote_k:
            cached["voting"], added = _voted_accuracy(args, out, dev, template, stage, name), True
        if args.judge_readout and "readout" not in cached:
            cached["readout"], added = _readout_accuracy(args, out, dev, template, stage, name), True
        if added:
            write_json(cached, path)
        return cached
    if not dev:
        return {}
    started = time.time()
    prompts, texts = _greedy_judgments(args, out, dev, template, stage, name)
    scores = [parse_judgment(t, template).score for t in texts]
    right, ties = pair_outcomes(scores)
    responses = [(p.metadata["ifeval"], getattr(p, side)) for p in dev for side in ("chosen", "rejected")]
    result = {"accuracy": sum(right) / len(right), "accuracy_ci": list(mean_ci(right)), "pairs": len(right),
              "ties": ties, "format_valid": sum(s is not None for s in scores) / len(scores),
              "source": str(out / "prep" / "heldout"), "model": str(out / stage),
              "constraint_verdicts": constraint_verdicts(responses, texts),
              "right": right}  # per dev pair, in file order: what a paired comparison with BT reads
    if args.judge_vote_k:
        result["voting"] = _voted_accuracy(args, out, dev, template, stage, name)
    if args.judge_readout:
        result["readout"] = _readout_accuracy(args, out, dev, template, stage, name)
    write_json(result, path)
    said = result["constraint_verdicts"]
    clock.done(f"judge measured ({stage})", started,
               f"dev-pair accuracy {result['accuracy']:.3f} on {len(right)} pairs, {ties} ties; constraint verdicts "
               f"right {said['right']} of {said['constraints']} (a per-constraint majority guess: "
               f"{said['majority_guess']})")
    return result


def _greedy_judgments(args: IFEvalArguments, out: Path, dev: list, template: Any, stage: str, name: str
                      ) -> tuple[list, list[str]]:
    """(the judge prompts of both sides of every dev pair, in the order chosen, rejected, ...; the judge's greedy
    judgments of them), the judgments from the stage's cache when they were made before."""
    render = _renderer(args, str(out / stage))
    backend = _judge_backend(args, str(out / stage), 0.0, out / "eval" / f"{name}.cache.sqlite")
    prompts = [render(p, getattr(p, side), template) for p in dev for side in ("chosen", "rejected")]
    texts = [t[0] for t in backend.generate(prompts, 1)]
    backend.cache.close()
    return prompts, texts


def _readout_accuracy(args: IFEvalArguments, out: Path, dev: list, template: Any, stage: str, name: str
                      ) -> dict[str, Any]:
    """The dev pairs ranked by the judge's expected score (`readout.expected_score`: its P(pass) at each of its
    own greedy constraint lines), the chosen side right when strictly higher; and how well P(pass) separates
    followed from not followed constraints (`readout.belief_auc`)."""
    from patarm.demo.ifeval.readout import belief_auc, constraint_beliefs, expected_score
    from patarm.eval.readout import word_ids
    from patarm.eval.stats import mean_ci
    from patarm.models import load_causal_lm

    started = time.time()
    prompts, texts = _greedy_judgments(args, out, dev, template, stage, name)
    model, tokenizer = load_causal_lm(str(out / stage), dtype=args.dtype,
                                      **({} if args.device == "cpu" else {"device_map": args.device}))
    model.eval()
    try:
        word_ids(tokenizer)
    except ValueError as err:
        raise ValueError(f"{out / stage}: {err}; or measure without it (--judge_readout false)") from None
    beliefs = constraint_beliefs(model, tokenizer, prompts, texts, args.batch_size)
    responses = [(p.metadata["ifeval"], getattr(p, side)) for p in dev for side in ("chosen", "rejected")]
    scores = [expected_score(row, b) for (row, _), b in zip(responses, beliefs)]
    right, ties = pair_outcomes(scores)
    separation = belief_auc(responses, beliefs)
    logger.info("judge (%s) on the dev pairs by its P(pass) per constraint line: accuracy %.3f, %d ties; P(pass) "
                "AUC against the checkers %s over %d lines (%.0f s)", stage, sum(right) / len(right), ties,
                "n/a" if separation["auc"] is None else f"{separation['auc']:.3f}", separation["lines"],
                time.time() - started)
    return {"accuracy": sum(right) / len(right), "accuracy_ci": list(mean_ci(right)), "pairs": len(right),
            "ties": ties, "unreadable": sum(s is None for s in scores), "p_pass": separation, "right": right}


def pair_outcomes(scores: list) -> tuple[list[float], int]:
    """(per pair: 1.0 when the chosen side's score is strictly above the rejected one's, else 0.0; the ties) from
    scores in the order chosen, rejected, chosen, ...; an unreadable score (None) is wrong, never a tie."""
    chosen, rejected = scores[::2], scores[1::2]
    return ([float(c is not None and r is not None and c > r) for c, r in zip(chosen, rejected)],
            sum(c is not None and c == r for c, r in zip(chosen, rejected)))


def _voted_accuracy(args: IFEvalArguments, out: Path, dev: list, template: Any, stage: str, name: str
                    ) -> dict[str, Any]:
    """voting@k on the dev pairs: each side's score is the mean of `judge_vote_k` sampled judgments
    (`patarm.eval.voting.mean_score`; unreadable ones skipped), the chosen side right when strictly higher."""
    from patarm.eval.stats import mean_ci
    from patarm.eval.voting import mean_score
    from patarm.judge import parse_judgment

    k = args.judge_vote_k
    started = time.time()
    render = _renderer(args, str(out / stage))
    backend = _judge_backend(args, str(out / stage), args.judge_vote_temperature,
                             out / "eval" / f"{name}.vote.cache.sqlite")
    prompts = [render(p, getattr(p, side), template) for p in dev for side in ("chosen", "rejected")]
    drawn = backend.generate(prompts, k, seed=args.seed)
    backend.cache.close()
    means = [mean_score([parse_judgment(t, template).score for t in texts]) for texts in drawn]
    right, ties = pair_outcomes(means)
    logger.info("judge (%s) on the dev pairs by voting@%d: accuracy %.3f, %d ties (%.0f s)", stage, k,
                sum(right) / len(right), ties, time.time() - started)
    return {"k": k, "temperature": args.judge_vote_temperature, "accuracy": sum(right) / len(right),
            "accuracy_ci": list(mean_ci(right)), "pairs": len(right), "ties": ties, "right": right}


def constraint_verdicts(responses: list[tuple[dict, str]], texts: list[str]) -> dict[str, Any]:
    """The judge's per-constraint `pass` / `fail` lines against the checkers' verdicts on the same responses: right,
    wrong, not stated (no line names the constraint, or its verdict is neither), out of every constraint of every
    response; beside what always guessing each constraint id's more frequent verdict on these responses gets right
    (a judge below it has learned a prior, not the checks); the same per constraint id (`by_id`). Lines read as
    the teacher writes them: `name :: ... :: pass|fail`, the constraint's registry id without its group."""
    from collections import Counter

    from patarm.demo.ifeval.pairs import followed

    counts, truth, by_id = Counter(), Counter(), {}
    for (row, response), text in zip(responses, texts):
        stated = {}
        for line in text.splitlines():
            parts = [part.strip() for part in line.split("::")]
            if len(parts) >= 2 and parts[-1] in ("pass", "fail"):
                stated.setdefault(parts[0], parts[-1] == "pass")
        for iid, ok in zip(row["instruction_id_list"], followed(row, response)):
            said = stated.get(iid.split(":", 1)[1])
            outcome = "not_stated" if said is None else "right" if said == ok else "wrong"
            counts[outcome] += 1
            by_id.setdefault(iid, Counter())[outcome] += 1
            truth[(iid, ok)] += 1

    def guess(iid: str) -> int:
        return max(truth[(iid, True)], truth[(iid, False)])

    return {"right": counts["right"], "wrong": counts["wrong"], "not_stated": counts["not_stated"],
            "constraints": sum(counts.values()), "majority_guess": sum(guess(iid) for iid in by_id),
            "by_id": {iid: {"right": c["right"], "of": sum(c.values()), "majority_guess": guess(iid)}
                      for iid, c in sorted(by_id.items())}}

