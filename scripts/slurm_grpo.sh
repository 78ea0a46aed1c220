#!/bin/bash
# sbatch --nodes=2 scripts/slurm_grpo.sh --config configs/grpo/qwen3-8b.yaml [--config configs/ablations/X.yaml] [--flag value ...]
#
# Multi-node GRPO-PAR (or any stage: STAGE=sft) on Slurm: one task per node, each running `accelerate launch`,
# which starts one training process per GPU. Node ranks come from $SLURM_NODEID, the rendezvous host is the
# first node of the allocation. Paper sizes: 8B RL --nodes=2 (16 GPUs), 14B RL --nodes=4 (32 GPUs).
# Arguments after the script name go to `patarm <stage>` unchanged (default: the 8B GRPO recipe).
# Submit from the repository root (Slurm starts the job there) after `mkdir -p logs` (Slurm opens the log file
# before the script runs).
#
# Environment knobs: STAGE (grpo), GPUS_PER_NODE (8), ACCELERATE_CONFIG (configs/accelerate/multi_node.yaml),
# MAIN_PROCESS_PORT (29500), MAIN_PROCESS_IP (default: the first node of the allocation, from scontrol),
# VENV (.venv; set VENV= to use the current python). Cluster-specific lines (partition, account, modules, NCCL
# interface) are yours to add below.
# DRY_RUN=1 prints the exact commands instead of running them: the srun line, then, as comments, the launch each
# node's task will run. Outside Slurm: DRY_RUN=1 SLURM_NNODES=2 MAIN_PROCESS_IP=node0 bash scripts/slurm_grpo.sh ...
#SBATCH --job-name=patarm-grpo
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --exclusive
#SBATCH --time=48:00:00
#SBATCH --output=logs/%x-%j.out
set -euo pipefail

STAGE=${STAGE:-grpo}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
ACCELERATE_CONFIG=${ACCELERATE_CONFIG:-configs/accelerate/multi_node.yaml}
MAIN_PROCESS_PORT=${MAIN_PROCESS_PORT:-29500}
VENV=${VENV-.venv}
DRY_RUN=${DRY_RUN:-}
if [ "$#" -eq 0 ]; then
    set -- --config configs/grpo/qwen3-8b.yaml
fi
if [ -n "$VENV" ] && [ -n "$DRY_RUN" ]; then
    printf '# source %q\n' "$VENV/bin/activate"
elif [ -n "$VENV" ]; then
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
fi
[ -n "$DRY_RUN" ] || mkdir -p logs

# show CMD...: print CMD on one line, each word shell-quoted only where it must be (copy-pastable).
show() {
    local out="" word safe='^[A-Za-z0-9_./:=,@%+-]+$'
    for word in "$@"; do
        if [[ $word =~ $safe ]]; then out+=" $word"; else out+=" '${word//\'/\'\\\'\'}'"; fi
    done
    printf '%s\n' "${out# }"
}

NNODES=${SLURM_NNODES:?run this through sbatch (or salloc + bash), SLURM_NNODES is not set}
MAIN_PROCESS_IP=${MAIN_PROCESS_IP:-$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)}
export NNODES GPUS_PER_NODE ACCELERATE_CONFIG MAIN_PROCESS_IP MAIN_PROCESS_PORT STAGE DRY_RUN
# Offline wandb unless a key is configured; NCCL tolerates the long generation phases.
export WANDB_MODE=${WANDB_MODE:-$([ -n "${WANDB_API_KEY:-}" ] && echo online || echo offline)}
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1

echo "patarm $STAGE on $NNODES node(s) × $GPUS_PER_NODE GPU(s), head $MAIN_PROCESS_IP:$MAIN_PROCESS_PORT: $*" >&2

# What each task runs. Single quotes: $SLURM_NODEID must be read inside each task (one per node), not here on the
# batch host. Under DRY_RUN the task prints its command (shell-quoted) instead of running it.
TASK='cmd=(accelerate launch --config_file "$ACCELERATE_CONFIG" --num_machines "$NNODES"'
TASK+=' --num_processes "$((NNODES * GPUS_PER_NODE))" --machine_rank "$SLURM_NODEID"'
TASK+=' --main_process_ip "$MAIN_PROCESS_IP" --main_process_port "$MAIN_PROCESS_PORT" -m patarm "$STAGE" "$@");'
TASK+=' if [ -n "$DRY_RUN" ]; then printf "%q " "${cmd[@]}"; echo; else exec "${cmd[@]}"; fi'
SRUN=(srun --nodes="$NNODES" --ntasks="$NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c "$TASK" patarm-launch "$@")

if [ -n "$DRY_RUN" ]; then
    show "${SRUN[@]}"
    for ((node = 0; node < NNODES; node++)); do
        SLURM_NODEID=$node bash -c "$TASK" patarm-launch "$@" | sed "s|^|# node $node: |; s| \$||"
    done
    exit 0
fi
"${SRUN[@]}"
