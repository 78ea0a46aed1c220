#!/bin/bash
# HOSTS="node0 node1" scripts/launch_multinode.sh --config configs/grpo/qwen3-8b.yaml [--config configs/ablations/X.yaml]
#
# Multi-node launch without a scheduler. Two ways to use it:
#   1. From one machine, start every node over ssh (passwordless ssh, the same checkout path and venv on all):
#        HOSTS="node0 node1" scripts/launch_multinode.sh --config configs/grpo/qwen3-8b.yaml
#      The first host is the rendezvous head (rank 0). Each node's output goes to logs/<host>.log.
#   2. By hand (or from your own scheduler), on every node with its own rank:
#        NNODES=2 NODE_RANK=0 MASTER_ADDR=node0 scripts/launch_multinode.sh --config configs/grpo/qwen3-8b.yaml
#        NNODES=2 NODE_RANK=1 MASTER_ADDR=node0 scripts/launch_multinode.sh --config configs/grpo/qwen3-8b.yaml
# Arguments go to `patarm <stage>` unchanged. Knobs: STAGE (grpo), GPUS_PER_NODE (8), MASTER_PORT (29500),
# ACCELERATE_CONFIG (configs/accelerate/multi_node.yaml), VENV (.venv), LAUNCHER (accelerate | torchrun).
# LAUNCHER=torchrun runs plain torchrun and hands DeepSpeed to the HF Trainer via `--deepspeed DS_CONFIG`
# (DS_CONFIG, default configs/deepspeed/zero3.json).
set -euo pipefail
cd "$(dirname "$0")/.."

STAGE=${STAGE:-grpo}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
MASTER_PORT=${MASTER_PORT:-29500}
ACCELERATE_CONFIG=${ACCELERATE_CONFIG:-configs/accelerate/multi_node.yaml}
DS_CONFIG=${DS_CONFIG:-configs/deepspeed/zero3.json}
LAUNCHER=${LAUNCHER:-accelerate}
VENV=${VENV-.venv}
if [ "$#" -eq 0 ]; then
    set -- --config configs/grpo/qwen3-8b.yaml
fi

if [ -n "${HOSTS:-}" ] && [ -z "${NODE_RANK:-}" ]; then
    # Mode 1: fan out over ssh, one background launcher per host, and wait for all of them.
    read -r -a hosts <<< "$HOSTS"
    mkdir -p logs
    args=$(printf '%q ' "$@")
    pids=()
    for rank in "${!hosts[@]}"; do
        host=${hosts[$rank]}
        ssh "$host" "cd $(printf '%q' "$PWD") && NNODES=${#hosts[@]} NODE_RANK=$rank MASTER_ADDR=${hosts[0]} \
            MASTER_PORT=$MASTER_PORT GPUS_PER_NODE=$GPUS_PER_NODE STAGE=$STAGE LAUNCHER=$LAUNCHER \
            ACCELERATE_CONFIG=$ACCELERATE_CONFIG DS_CONFIG=$DS_CONFIG VENV=$VENV \
            bash scripts/launch_multinode.sh $args" > "logs/$host.log" 2>&1 &
        pids+=("$!")
        echo "started rank $rank on $host (log: logs/$host.log)"
    done
    status=0
    for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
    exit "$status"
fi

# Mode 2: this node only.
: "${NNODES:?set NNODES (or HOSTS)}" "${NODE_RANK:?set NODE_RANK (or HOSTS)}" "${MASTER_ADDR:?set MASTER_ADDR (or HOSTS)}"
if [ -n "$VENV" ]; then
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
fi
export WANDB_MODE=${WANDB_MODE:-$([ -n "${WANDB_API_KEY:-}" ] && echo online || echo offline)}

case "$LAUNCHER" in
    accelerate)
        exec accelerate launch --config_file "$ACCELERATE_CONFIG" \
            --num_machines "$NNODES" --num_processes "$((NNODES * GPUS_PER_NODE))" --machine_rank "$NODE_RANK" \
            --main_process_ip "$MASTER_ADDR" --main_process_port "$MASTER_PORT" \
            -m patarm "$STAGE" "$@" ;;
    torchrun)
        exec torchrun --nnodes "$NNODES" --nproc_per_node "$GPUS_PER_NODE" --node_rank "$NODE_RANK" \
            --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
            -m patarm "$STAGE" "$@" --deepspeed "$DS_CONFIG" ;;
    *)
        echo "LAUNCHER must be accelerate or torchrun, got $LAUNCHER" >&2; exit 2 ;;
esac
