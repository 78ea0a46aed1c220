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
# ACCELERATE_CONFIG (configs/accelerate/multi_node.yaml), VENV (.venv; VENV= uses the current PATH),
# LAUNCHER (accelerate | torchrun). LAUNCHER=torchrun runs plain torchrun and hands DeepSpeed to the HF Trainer
# via `--deepspeed DS_CONFIG` (DS_CONFIG, default configs/deepspeed/zero3.json).
# DRY_RUN=1 prints the exact commands (shell-quoted, one per line) instead of running them: in mode 1 the ssh
# command of each host followed, as a comment, by the launch that host will run; in mode 2 this node's launch.
# Try it on one machine: tests/train/test_multinode.py runs the two ranks' printed commands side by side.
set -euo pipefail
cd "$(dirname "$0")/.."

STAGE=${STAGE:-grpo}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
MASTER_PORT=${MASTER_PORT:-29500}
ACCELERATE_CONFIG=${ACCELERATE_CONFIG:-configs/accelerate/multi_node.yaml}
DS_CONFIG=${DS_CONFIG:-configs/deepspeed/zero3.json}
LAUNCHER=${LAUNCHER:-accelerate}
VENV=${VENV-.venv}
DRY_RUN=${DRY_RUN:-}
if [ "$#" -eq 0 ]; then
    set -- --config configs/grpo/qwen3-8b.yaml
fi

# show CMD...: print CMD on one line, each word shell-quoted only where it must be (copy-pastable).
show() {
    local out="" word safe='^[A-Za-z0-9_./:=,@%+-]+$'
    for word in "$@"; do
        if [[ $word =~ $safe ]]; then out+=" $word"; else out+=" '${word//\'/\'\\\'\'}'"; fi
    done
    printf '%s\n' "${out# }"
}
# run CMD...: execute it, or under DRY_RUN print it.
run() {
    if [ -n "$DRY_RUN" ]; then show "$@"; else exec "$@"; fi
}

if [ -n "${HOSTS:-}" ] && [ -z "${NODE_RANK:-}" ]; then
    # Mode 1: fan out over ssh, one background launcher per host, and wait for all of them.
    read -r -a hosts <<< "$HOSTS"
    args=$(printf '%q ' "$@")
    knobs="NNODES=${#hosts[@]} MASTER_ADDR=${hosts[0]} MASTER_PORT=$MASTER_PORT GPUS_PER_NODE=$GPUS_PER_NODE"
    knobs="$knobs STAGE=$STAGE LAUNCHER=$LAUNCHER ACCELERATE_CONFIG=$ACCELERATE_CONFIG DS_CONFIG=$DS_CONFIG VENV=$VENV"
    [ -n "$DRY_RUN" ] || mkdir -p logs
    pids=()
    for rank in "${!hosts[@]}"; do
        host=${hosts[$rank]}
        remote="cd $(printf '%q' "$PWD") && $knobs NODE_RANK=$rank bash scripts/launch_multinode.sh $args"
        if [ -n "$DRY_RUN" ]; then
            show ssh "$host" "$remote" | sed "s|\$| > logs/$host.log 2>\&1 \&|"
            # shellcheck disable=SC2086
            env $knobs NODE_RANK="$rank" DRY_RUN=1 bash scripts/launch_multinode.sh "$@" | sed "s|^|# on $host: |"
            continue
        fi
        ssh "$host" "$remote" > "logs/$host.log" 2>&1 &
        pids+=("$!")
        echo "started rank $rank on $host (log: logs/$host.log)"
    done
    status=0
    for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
    exit "$status"
fi

# Mode 2: this node only.
: "${NNODES:?set NNODES (or HOSTS)}" "${NODE_RANK:?set NODE_RANK (or HOSTS)}" "${MASTER_ADDR:?set MASTER_ADDR (or HOSTS)}"
if [ -n "$VENV" ] && [ -n "$DRY_RUN" ]; then
    printf '# source %q\n' "$VENV/bin/activate"
elif [ -n "$VENV" ]; then
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
fi
export WANDB_MODE=${WANDB_MODE:-$([ -n "${WANDB_API_KEY:-}" ] && echo online || echo offline)}

case "$LAUNCHER" in
    accelerate)
        run accelerate launch --config_file "$ACCELERATE_CONFIG" \
            --num_machines "$NNODES" --num_processes "$((NNODES * GPUS_PER_NODE))" --machine_rank "$NODE_RANK" \
            --main_process_ip "$MASTER_ADDR" --main_process_port "$MASTER_PORT" \
            -m patarm "$STAGE" "$@" ;;
    torchrun)
        run torchrun --nnodes "$NNODES" --nproc_per_node "$GPUS_PER_NODE" --node_rank "$NODE_RANK" \
            --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
            -m patarm "$STAGE" "$@" --deepspeed "$DS_CONFIG" ;;
    *)
        echo "LAUNCHER must be accelerate or torchrun, got $LAUNCHER" >&2; exit 2 ;;
esac
