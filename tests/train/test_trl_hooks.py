"""The TRL / transformers hooks the project overrides or calls still have the signatures it was written against.

PaTaRM subclasses at TRL's extension points (`_get_train_sampler`, `_generate_and_score_completions`,
`_save_checkpoint`, `GRPOConfig.__post_init__`, `ProgressCallback.on_log`, and for the speed switches
`_get_per_token_logps_and_entropies`, `_generate_single_turn` and the fused LM head's `_use_triton`) and
reuses one private parser helper (`HfArgumentParser._parse_dataclass_field`). Private hooks change without
notice: when one changes here, read the new TRL code, adapt the override, then update RECORDED and the `trl` bound
in pyproject.toml together.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

# (owner, hook) -> [(parameter, kind, default)]; annotations are left out (their repr varies across Pythons)
RECORDED = {
    ("transformers.Trainer", "_save_checkpoint"): [("self", "POSITIONAL_OR_KEYWORD", None),
                                                   ("model", "POSITIONAL_OR_KEYWORD", None),
                                                   ("trial", "POSITIONAL_OR_KEYWORD", None)],
    ("trl.GRPOTrainer", "_generate_and_score_completions"): [("self", "POSITIONAL_OR_KEYWORD", None),
                                                            ("inputs", "POSITIONAL_OR_KEYWORD", None)],
    ("trl.GRPOTrainer", "_get_train_sampler"): [("self", "POSITIONAL_OR_KEYWORD", None),
                                               ("dataset", "POSITIONAL_OR_KEYWORD", "None")],
    ("trl.GRPOConfig", "__post_init__"): [("self", "POSITIONAL_OR_KEYWORD", None)],
    ("transformers.ProgressCallback", "on_log"): [("self", "POSITIONAL_OR_KEYWORD", None),
                                                  ("args", "POSITIONAL_OR_KEYWORD", None),
                                                  ("state", "POSITIONAL_OR_KEYWORD", None),
                                                  ("control", "POSITIONAL_OR_KEYWORD", None),
                                                  ("logs", "POSITIONAL_OR_KEYWORD", "None"),
                                                  ("kwargs", "VAR_KEYWORD", None)],
    ("transformers.HfArgumentParser", "_parse_dataclass_field"): [("parser", "POSITIONAL_OR_KEYWORD", None),
                                                                  ("field", "POSITIONAL_OR_KEYWORD", None)],
    # patarm.train.speed: the shared-prefix loss, the shared-prefix rollouts and the compact LM head
    ("trl.GRPOTrainer", "_get_per_token_logps_and_entropies"): [
        ("self", "POSITIONAL_OR_KEYWORD", None), ("model", "POSITIONAL_OR_KEYWORD", None),
        ("input_ids", "POSITIONAL_OR_KEYWORD", None), ("attention_mask", "POSITIONAL_OR_KEYWORD", None),
        ("logits_to_keep", "POSITIONAL_OR_KEYWORD", None), ("batch_size", "POSITIONAL_OR_KEYWORD", "None"),
        ("compute_entropy", "POSITIONAL_OR_KEYWORD", "False"), ("compute_aux_loss", "POSITIONAL_OR_KEYWORD", "False"),
        *[(name, "POSITIONAL_OR_KEYWORD", "None") for name in (
            "pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes", "num_tiles",
            "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids")]],
    ("trl.GRPOTrainer", "_generate_single_turn"): [
        ("self", "POSITIONAL_OR_KEYWORD", None), ("prompt_ids", "POSITIONAL_OR_KEYWORD", None),
        ("images", "POSITIONAL_OR_KEYWORD", None), ("multimodal_fields", "POSITIONAL_OR_KEYWORD", None),
        ("num_generations", "POSITIONAL_OR_KEYWORD", None), ("has_tool_images", "POSITIONAL_OR_KEYWORD", "False")],
    ("trl.trainer.utils", "_use_triton"): [("device", "POSITIONAL_OR_KEYWORD", None)],
}
# GRPOConfig fields the pair-batch check and the pair-preserving sampler read
GRPO_FIELDS = ("per_device_train_batch_size", "steps_per_generation", "generation_batch_size", "num_generations",
               "num_iterations", "shuffle_dataset", "seed")


def _owner(dotted: str):
    import importlib

    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _shape(fn) -> list[tuple[str, str, str | None]]:
    return [(p.name, p.kind.name, None if p.default is inspect.Parameter.empty else repr(p.default))
            for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("owner, hook", sorted(RECORDED), ids=lambda x: x)
def test_overridden_hook_keeps_its_signature(owner, hook):
    fn = getattr(_owner(owner), hook, None)
    assert fn is not None, f"{owner}.{hook} is gone: the override in patarm no longer runs"
    assert _shape(fn) == RECORDED[(owner, hook)], f"{owner}.{hook} changed its signature"


def test_grpo_config_still_has_the_fields_the_sampler_reads():
    from trl import GRPOConfig

    names = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert set(GRPO_FIELDS) <= names, sorted(set(GRPO_FIELDS) - names)


def test_the_trl_in_use_is_within_the_tested_bound():
    """pyproject caps trl at the newest version these hooks were checked against."""
    from pathlib import Path

    import tomllib
    import trl
    from packaging.requirements import Requirement

    deps = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [Requirement(d).specifier for d in deps if Requirement(d).name == "trl"]
    assert any(s.operator == "<" for s in spec), "trl needs an upper bound: its private hooks are overridden"
    assert trl.__version__ in spec, f"trl {trl.__version__} is outside {spec}"
