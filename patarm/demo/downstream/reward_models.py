"""The reward models measured on the judge run's held-out pairs: each one's accuracy (the judge from its own
measurement or its quickstart report, BT scored here), each learned one against BT on the same pairs (McNemar), and
whether each prefers the longer side of a pair. The downstream report and `--until reward_models` read them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from patarm.demo.downstream.config import DownstreamArguments
from patarm.io import read_json, read_jsonl


def reward_model_accuracy(args: DownstreamArguments, bt: str | None) -> dict[str, Any]:
    """Held-out pair accuracy of the judge (from its quickstart report) and of the BT model (measured here, or read
    back from an earlier run in this folder)."""
    from patarm.demo.downstream.train import bt_pair_accuracy

    out: dict[str, Any] = {}
    report = Path(args.judge_run) / "report.json"
    measured = Path(args.run_dir) / "eval" / "judge_pairs.json"  # a recipe that trains its own judge writes it
    if measured.is_file():
        for name, file in (("judge", measured), ("judge (SFT)", measured.with_name("judge_pairs_sft.json"))):
            if file.is_file():  # the SFT one: the same judge before its GRPO-PAR
                out[name] = read_json(file)
                if voting := out[name].pop("voting", None):  # its ties broken by k sampled judgments
                    out[f"{name} vote@{voting['k']}"] = voting
                if readout := out[name].pop("readout", None):  # by its P(pass) per constraint line
                    out[f"{name} P(pass)"] = readout
    elif report.is_file():
        stages = read_json(report).get("stages", {})
        last = stages.get("grpo") or stages.get("sft")
        if last:
            out["judge"] = {"accuracy": last["accuracy"], "accuracy_ci": last.get("accuracy_ci"), "source": str(report)}
    heldout = heldout_file(args)
    cache = Path(args.run_dir) / "eval" / "bt_pairs.json"
    if bt and heldout.is_file() and heldout.stat().st_size:  # a run may have no held-out pair (e.g. tiny sizes)
        out["bt"] = bt_pair_accuracy(bt, heldout, cache)
    elif cache.is_file():  # measured by an earlier run in this folder (its BT arm); this one needs no BT model
        out["bt"] = read_json(cache)
    return out


def heldout_file(args: DownstreamArguments) -> Path:
    """The judge run's held-out pairs, which every reward model is measured on."""
    return Path(args.judge_run) / "prep" / "heldout" / "pairs.jsonl"


def heldout_pairs(args: DownstreamArguments) -> list[dict]:
    """The held-out pairs (`heldout_file`) in the order the reward models were measured on; [] when none were kept."""
    path = heldout_file(args)
    return read_jsonl(path) if path.is_file() else []


def reward_models_by_length(measured: dict[str, Any], pairs: list[dict]) -> dict[str, Any]:
    """Does a reward model prefer length? Its accuracy on the held-out pairs whose chosen side is the longer (in
    words) against those whose chosen side is the shorter, with Fisher's exact p for the difference: a model that
    reads what the label reads is as accurate on both; one that rewards length is right more often where the chosen
    side is longer. `pairs` in the order of each model's `right`; pairs of equal length counted, not split. {}
    without per-pair outcomes."""
    from scipy.stats import fisher_exact

    gaps = [len(p["chosen"].split()) - len(p["rejected"].split()) for p in pairs]  # > 0: the chosen side is longer
    out: dict[str, Any] = {}
    for name, result in measured.items():
        right = result.get("right")
        if not right or len(right) != len(pairs):
            continue
        halves = {"chosen longer": [r for r, g in zip(right, gaps) if g > 0],
                  "chosen shorter": [r for r, g in zip(right, gaps) if g < 0]}
        table = [[sum(h), len(h) - sum(h)] for h in halves.values()]
        out[name] = {k: {"pairs": len(h), "accuracy": sum(h) / len(h) if h else None} for k, h in halves.items()}
        out[name] |= {"equal length": gaps.count(0),
                      "p_value": float(fisher_exact(table).pvalue) if all(map(sum, table)) else None}
    return out


def reward_models_paired(measured: dict[str, Any]) -> dict[str, Any]:
    """Each learned reward model against BT on the same held-out pairs: the difference in accuracy, the pairs only
    one of them gets right, and the exact McNemar p (a sign test on those pairs). {} unless both kept per-pair
    outcomes of the same pairs."""
    from patarm.eval.stats import sign_test

    bt = measured.get("bt", {}).get("right")
    out = {}
    for name, result in measured.items():
        right = result.get("right")
        if name == "bt" or not bt or not right or len(right) != len(bt):
            continue
        test = sign_test(right, bt)
        out[f"{name} vs bt"] = {"difference": (sum(right) - sum(bt)) / len(bt), "pairs": len(bt),
                                f"{name} alone right": test["a_better"], "bt alone right": test["b_better"],
                                "p_value": test["p_value"]}
    return out
