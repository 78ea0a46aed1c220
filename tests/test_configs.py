"""Every shipped config loads into its stage's dataclasses (no training), says how to run it on its first
line, and keeps GRPO pairs whole; the accelerate / DeepSpeed files and launch scripts are well formed."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from patarm.config import ConfigError, expand_run_dir
from patarm.sampling import check_pair_batching

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
SFT = sorted((CONFIGS / "sft").glob("*.yaml"))
OTHER_STAGES = sorted(p for kind in ("bt", "export", "eval") for p in (CONFIGS / kind).glob("*.yaml"))
GRPO = sorted((CONFIGS / "grpo").glob("*.yaml"))
ABLATIONS = sorted((CONFIGS / "ablations").glob("*.yaml"))
ACCELERATE = sorted((CONFIGS / "accelerate").glob("*.yaml"))
DEEPSPEED = sorted((CONFIGS / "deepspeed").glob("*.json"))
SCRIPTS = sorted((ROOT / "scripts").glob("*.sh"))
BASE_RECIPE = CONFIGS / "grpo" / "qwen3-8b.yaml"
PAPER_GPUS = {"qwen3-8b": 16, "qwen3-14b": 32}  # Appendix D: RL on 16 (8B) and 32 (14B) A100s
EXPECTED_ABLATIONS = {
    "rubric-primary": {"rubric_mode": "primary"},
    "rubric-generated": {"rubric_mode": "generated"},
    "rubric-adaptive": {"rubric_mode": "adaptive"},
    "f-graded": {"margin": "graded"},
    "f-constant": {"margin": "constant"},
    "noise-10": {"train_file": "runs/paper/prep/noise_10/pairs.jsonl"},   # configs/prep/label-noise.yaml writes them
    "noise-20": {"train_file": "runs/paper/prep/noise_20/pairs.jsonl"},
    "noise-50": {"train_file": "runs/paper/prep/noise_50/pairs.jsonl"},
    "sft-only": {"num_train_epochs": 0},
    "sft-grpo": {"num_train_epochs": 1, "margin": "graded", "rubric_mode": "adaptive"},
}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.fixture(scope="module")
def stage_types():
    """The training stages, parsed as `patarm <stage>` parses them; trl is imported here, once. The GPU recipes
    say bf16: true, which TrainingArguments refuses on a machine without a bf16 GPU, so that probe answers yes."""
    from patarm.train import stage_types

    stage_types("grpo")  # imports trl

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("transformers.training_args.is_torch_bf16_gpu_available", lambda *a, **k: True)
        yield {"sft": "sft", "grpo": "grpo"}


def _load(stage: str, *paths: Path):
    from patarm.train import parse_args as parse

    return parse(stage, [a for p in paths for a in ("--config", str(p))])


def _value(parsed, key):
    for obj in parsed:
        if hasattr(obj, key):
            return getattr(obj, key)
    raise AssertionError(f"{key} is in no dataclass")


def _assert_file_values(parsed, path: Path):
    """Every key a file sets arrives in the dataclasses with that value (later files win, so check the last)."""
    run_dir = _value(parsed, "run_dir")
    for key, value in yaml.safe_load(path.read_text()).items():
        value = expand_run_dir(value, run_dir)
        got = _value(parsed, key)
        if key == "report_to":
            assert sorted(got) == sorted(value), (path.name, key)
        else:
            assert got == value, f"{path.name}: {key} = {got!r}, file says {value!r}"


def test_the_promised_files_are_shipped():
    names = lambda paths: {p.stem for p in paths}  # noqa: E731
    assert {"tiny", "qwen3-8b", "qwen3-14b"} <= names(SFT)
    assert {"tiny", "qwen3-8b", "qwen3-14b"} <= names(GRPO)
    assert set(EXPECTED_ABLATIONS) <= names(ABLATIONS)
    assert {"single_gpu", "multi_gpu", "zero2", "zero3", "multi_node"} <= names(ACCELERATE)
    assert {"zero2", "zero3"} <= names(DEEPSPEED)
    assert {"slurm_grpo", "launch_multinode"} <= names(SCRIPTS)


@pytest.mark.parametrize("path", SFT, ids=lambda p: p.stem)
def test_sft_config_loads(stage_types, path):
    parsed = _load(stage_types["sft"], path)
    data, args, model_args = parsed
    _assert_file_values(parsed, path)
    assert args.assistant_only_loss and data.train_files
    if path.stem == "tiny":
        assert model_args.model_name_or_path.startswith("tiny") and args.use_cpu and not args.bf16
        assert not args.gradient_checkpointing
    else:
        assert model_args.model_name_or_path.startswith("Qwen/Qwen3-")
        assert args.bf16 and args.gradient_checkpointing and args.num_train_epochs == 1  # paper: one epoch
        assert set(args.report_to) >= {"wandb", "tensorboard"}


@pytest.mark.parametrize("path", GRPO, ids=lambda p: p.stem)
def test_grpo_config_loads_and_keeps_pairs_whole(stage_types, path):
    parsed = _load(stage_types["grpo"], path)
    data, args, model_args = parsed
    _assert_file_values(parsed, path)
    check_pair_batching(args.per_device_train_batch_size, args.steps_per_generation, args.num_generations)
    assert data.margin in ("graded", "constant") or "." in data.margin
    if path.stem in PAPER_GPUS:
        gpus = PAPER_GPUS[path.stem]
        assert args.num_generations == 8 and args.max_completion_length == 4096  # paper: response length 4096
        assert (data.margin, data.rubric_mode) == ("graded", "adaptive")
        assert args.use_vllm and args.vllm_mode == "colocate" and gpus % args.vllm_tensor_parallel_size == 0
        assert (
            data.max_prompt_length and args.vllm_max_model_length >= data.max_prompt_length + args.max_completion_length
        )
        assert args.bf16 and args.gradient_checkpointing and args.num_train_epochs == 1
        assert args.gradient_accumulation_steps == args.steps_per_generation  # one optimizer step per generation
        assert set(args.report_to) >= {"wandb", "tensorboard"}
        assert model_args.model_name_or_path == f"runs/paper/sft-{path.stem}"  # GRPO starts from the SFT judge
        sft_args = _load("sft", CONFIGS / "sft" / f"{path.stem}.yaml")[1]
        assert sft_args.output_dir == model_args.model_name_or_path
        assert data.train_file == "runs/paper/prep/rl/pairs.jsonl"  # what configs/prep/paper.yaml's rl step writes


@pytest.mark.parametrize("path", ABLATIONS, ids=lambda p: p.stem)
def test_ablation_merges_onto_the_8b_recipe(stage_types, path):
    base = _load(stage_types["grpo"], BASE_RECIPE)
    parsed = _load(stage_types["grpo"], BASE_RECIPE, path)
    _assert_file_values(parsed, path)
    for key, value in EXPECTED_ABLATIONS.get(path.stem, {}).items():
        assert _value(parsed, key) == value, (path.stem, key)
    overridden = set(yaml.safe_load(path.read_text()))
    for key in ("learning_rate", "beta", "num_generations", "max_completion_length", "per_device_train_batch_size"):
        if key not in overridden:  # everything not overridden is the recipe's
            assert _value(parsed, key) == _value(base, key)
    _, args, _ = parsed
    check_pair_batching(args.per_device_train_batch_size, args.steps_per_generation, args.num_generations)
    assert args.output_dir != base[1].output_dir  # an arm never overwrites the recipe's run


def test_ablation_arms_write_to_different_folders():
    outs = [yaml.safe_load(p.read_text())["output_dir"] for p in ABLATIONS]
    assert len(set(outs)) == len(outs)


@pytest.mark.parametrize("path", SFT + GRPO + OTHER_STAGES + ABLATIONS + ACCELERATE, ids=_rel)
def test_first_line_is_the_command(path):
    first = path.read_text().splitlines()[0]
    assert first.startswith("#"), f"{_rel(path)}: the first line must be a comment with the command"
    assert _rel(path) in first, f"{_rel(path)}: the first line must name the file in its command"
    kind = path.parent.name
    if kind in ("sft", "grpo", "bt", "export", "eval"):
        assert f"patarm {kind}" in first
    elif kind == "ablations":
        assert f"patarm grpo --config {_rel(BASE_RECIPE)} --config {_rel(path)}" in first
    else:
        assert f"accelerate launch --config_file {_rel(path)}" in first and "-m patarm " in first
    for ref in re.findall(r"configs/[\w./-]+\.(?:yaml|json)|scripts/[\w.-]+\.sh", first):
        assert (ROOT / ref).is_file(), f"{_rel(path)}: its command names {ref}, which does not exist"


def test_unknown_key_raises_naming_the_file_and_the_nearest_key(stage_types, tmp_path):
    bad = tmp_path / "typo.yaml"
    bad.write_text("# patarm grpo --config typo.yaml\nlearning_rat: 1.0e-5\n")
    with pytest.raises(ConfigError, match=r"typo\.yaml: unknown key 'learning_rat' \(did you mean 'learning_rate'\?\)"):
        _load(stage_types["grpo"], CONFIGS / "grpo" / "tiny.yaml", bad)
    with pytest.raises(ConfigError, match=r"unknown option '--lerning_rate' \(did you mean '--learning_rate'\?\)"):
        from patarm.train import parse_args as parse

        parse("grpo", ["--config", str(CONFIGS / "grpo" / "tiny.yaml"), "--lerning_rate", "1"])


# With a DeepSpeed config file, accelerate refuses these accelerate-config fields (they belong in the JSON).
_DS_FILE_CONFLICTS = {"gradient_accumulation_steps", "gradient_clipping", "zero_stage", "offload_optimizer_device",
                      "offload_param_device", "zero3_save_16bit_model", "mixed_precision"}


@pytest.mark.parametrize("path", ACCELERATE, ids=lambda p: p.stem)
def test_accelerate_config_loads(path):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(path))
    raw = yaml.safe_load(path.read_text())
    assert config.num_processes >= 1 and config.num_machines >= 1
    if config.distributed_type.value == "DEEPSPEED":
        ds = raw["deepspeed_config"]
        ds_file = ROOT / ds["deepspeed_config_file"]
        assert ds_file.is_file()
        assert not _DS_FILE_CONFLICTS & (set(ds) | set(raw)), f"{path.name} sets fields the DS JSON owns"
        stage = json.loads(ds_file.read_text())["zero_optimization"]["stage"]
        assert ds.get("zero3_init_flag", False) == (stage == 3)
    if path.stem == "multi_node":
        assert config.num_machines > 1 and config.num_processes % config.num_machines == 0
    if path.stem == "single_gpu":
        assert config.num_processes == 1


@pytest.mark.parametrize("path", DEEPSPEED, ids=lambda p: p.stem)
def test_deepspeed_json_parses(path):
    config = json.loads(path.read_text())
    zero = config["zero_optimization"]
    assert zero["stage"] == int(path.stem.removeprefix("zero"))
    for key in (
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "gradient_clipping",
    ):
        assert config[key] == "auto", f"{path.name}: {key} should be 'auto' so the HF Trainer fills it"
    assert config["bf16"]["enabled"] == "auto"
    if zero["stage"] == 3:
        assert zero["stage3_gather_16bit_weights_on_model_save"]  # save_model writes a full checkpoint
    try:
        from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    except Exception:  # deepspeed absent or unusable here: the JSON checks above stand
        return
    DeepSpeedZeroConfig(**{k: (10**6 if v == "auto" else v) for k, v in zero.items()})


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_launch_script_is_valid_bash(path):
    subprocess.run(["bash", "-n", str(path)], check=True)
    lines = path.read_text().splitlines()
    assert lines[0].startswith("#!") and lines[1].startswith("#") and _rel(path) in lines[1]
    text = "\n".join(lines)
    assert "-m patarm" in text
    if path.stem == "slurm_grpo":
        for piece in ("srun", "accelerate launch", "--machine_rank \"$SLURM_NODEID\"", "scontrol show hostnames",
                      "--num_machines \"$NNODES\"", "SLURM_NNODES", "--main_process_ip"):
            assert piece in text, piece


def test_unknown_stage_raises_naming_the_stages():
    from patarm.train import stage_types

    with pytest.raises(
        ValueError, match=r"unknown training stage 'grp' \(did you mean 'grpo'\?\); stages: sft, grpo, bt"
    ):
        stage_types("grp")


@pytest.mark.parametrize("spec", ["patarm.rewards:graded_margin", "patarm.rewards.graded_margin"])
def test_import_object_takes_both_spellings(spec):
    from patarm.config import import_object
    from patarm.rewards import graded_margin

    assert import_object(spec, "margin function") is graded_margin


@pytest.mark.parametrize("spec", ["patarm.rewards:nope", "no_such_module.f", "nodots"])
def test_import_object_names_the_setting_when_it_fails(spec):
    from patarm.config import import_object

    with pytest.raises(
        ValueError, match=rf"prompt_builder '{spec}' is not an importable 'package.module:name' .*; try"
    ):
        import_object(spec, "prompt_builder", "; try again")


def test_mean_score_skips_invalid_scores():
    from patarm.judge import mean_score

    assert mean_score([1, None, 4]) == 2.5 and mean_score([None, None]) is None and mean_score([]) is None
