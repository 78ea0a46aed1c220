#!/usr/bin/env bash
# scripts/gsm8k_gpu_check.sh RUN_DIR [extra quickstart flags...]
#
# The GSM8K skill recipe's CPU default (gsm8k-recipe.yaml: its sizes, teacher, seed and method) on one CUDA GPU:
# the three stage configs are the CPU ones with `use_cpu: false` and `bf16: true`, written into RUN_DIR/gpu-configs/,
# and judging runs on the GPU in bf16 (`--judge_device cuda --eval_dtype bfloat16`). Everything else is the CPU
# default, so its report sets beside a CPU run's on the same seed (docs/gsm8k-skill.md: "A GPU").
# Extra flags go to `patarm quickstart` after these, e.g. `--seeds 0 1 2`, `--model gguf:/path/model.gguf`,
# `--follows_no_repeat 1 --grpo_config RUN_DIR/gpu-configs/gsm8k-grpo-par.yaml` (the default before 2026-12-04).
# DRY_RUN=1 writes the configs and prints the command instead of running it.
set -euo pipefail
if [[ $# -lt 1 || "$1" == -* ]]; then
  echo "usage: scripts/gsm8k_gpu_check.sh RUN_DIR [quickstart flags...] — name the run folder first" >&2; exit 2
fi
run_dir=$(realpath -m "$1")
shift
cd "$(dirname "$0")/.."
configs="$run_dir/gpu-configs"
mkdir -p "$configs"
python3 - "$configs" <<'EOF'
import sys
from pathlib import Path

import yaml

out = Path(sys.argv[1])
for name in ("gsm8k-sft.yaml", "gsm8k-grpo.yaml", "gsm8k-grpo-par.yaml", "gsm8k-bt.yaml"):
    config = yaml.safe_load((Path("patarm/demo/configs") / name).read_text())
    config |= {"use_cpu": False, "bf16": True}
    (out / name).write_text(f"# {name} of the CPU default on one GPU (scripts/gsm8k_gpu_check.sh)\n"
                            + yaml.safe_dump(config, sort_keys=False))
EOF
command=(python3 -m patarm quickstart --recipe gsm8k-skill --run_dir "$run_dir" --judge_device cuda
  --eval_dtype bfloat16 --sft_config "$configs/gsm8k-sft.yaml" --grpo_config "$configs/gsm8k-grpo.yaml"
  --bt_config "$configs/gsm8k-bt.yaml" "$@")
if [[ "${DRY_RUN:-0}" == 1 ]]; then
  printf '%q ' "${command[@]}"; echo
else
  exec "${command[@]}"
fi
