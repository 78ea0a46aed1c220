"""Slow tier: a two-"machine" launch on one machine. `scripts/launch_multinode.sh` (dry run) prints each node's
`accelerate launch --num_machines 2 --machine_rank R --main_process_ip 127.0.0.1 --main_process_port P
--num_processes 2` (one process per machine); both printed commands then run side by side, GRPO-PAR under plain
DDP (configs/accelerate/cpu_multi_node.yaml) and under DeepSpeed ZeRO-3 (configs/accelerate/multi_node.yaml, the
paper's multi-node file). The pair audit shows that each rank scored whole pairs, and the weight audit
(`PATARM_WEIGHT_AUDIT`) that the two ranks ended with bit-equal weights, moved from the start and saved as such.
"""

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import DEMO_PAIRS

ROOT = Path(__file__).resolve().parents[2]
GENERATIONS = 4  # configs/grpo/tiny.yaml


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_commands(accelerate_config: str, port: int, argv: list[str]) -> list[list[str]]:
    """The launch each of the two nodes runs, as scripts/launch_multinode.sh prints it."""
    commands = []
    for rank in (0, 1):
        env = {**os.environ, "DRY_RUN": "1", "NNODES": "2", "NODE_RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "GPUS_PER_NODE": "1", "ACCELERATE_CONFIG": accelerate_config, "VENV": ""}
        out = subprocess.run(["bash", "scripts/launch_multinode.sh", *argv], cwd=ROOT, env=env, check=True,
                             capture_output=True, text=True).stdout
        (line,) = [ln for ln in out.splitlines() if not ln.startswith("#")]
        commands.append(shlex.split(line))
    return commands


def _run_side_by_side(commands: list[list[str]], env: dict, logs: Path, timeout: int = 900) -> None:
    procs = []
    for rank, cmd in enumerate(commands):
        log = open(logs / f"node-{rank}.log", "w")
        procs.append((subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    try:
        codes = [p.wait(timeout=timeout) for p, _ in procs]
    finally:
        for p, log in procs:
            if p.poll() is None:
                p.kill()
            log.close()
    tails = "\n".join(f"--- node {r} ---\n" + (logs / f"node-{r}.log").read_text()[-4000:] for r in range(len(procs)))
    assert codes == [0, 0], tails


def _fingerprint_of_folder(folder: Path) -> dict:
    from safetensors.torch import load_file

    from patarm.train.common import weight_fingerprint

    return weight_fingerprint(load_file(str(folder / "model.safetensors")).items())


@pytest.mark.slow
@pytest.mark.parametrize("accelerate_config", ["configs/accelerate/cpu_multi_node.yaml",
                                               "configs/accelerate/multi_node.yaml"], ids=["ddp", "deepspeed-zero3"])
def test_two_machines_keep_pairs_whole_and_agree_on_the_weights(tmp_path, accelerate_config, sft_judge):
    out, port = tmp_path / "run", _free_port()
    argv = [
        "--config",
        "configs/grpo/tiny.yaml",
        "--model_name_or_path",
        str(sft_judge),
        "--train_file",
        str(DEMO_PAIRS),
        "--output_dir",
        str(out),
        "--max_steps",
        "2",
        "--save_strategy",
        "no",
        "--report_to",
        "none",
    ]
    commands = _node_commands(accelerate_config, port, argv)
    for rank, cmd in enumerate(commands):
        assert cmd[:2] == ["accelerate", "launch"] and cmd[cmd.index("-m"):][:3] == ["-m", "patarm", "grpo"]
        flags = dict(zip(cmd[2:cmd.index("-m"):2], cmd[3:cmd.index("-m"):2]))
        assert flags == {
            "--config_file": accelerate_config,
            "--num_machines": "2",
            "--num_processes": "2",
            "--machine_rank": str(rank),
            "--main_process_ip": "127.0.0.1",
            "--main_process_port": str(port),
        }
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PATARM_PAIR_AUDIT": str(tmp_path / "pairs"), "PATARM_WEIGHT_AUDIT": str(tmp_path / "weights"),
           "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    _run_side_by_side(commands, env, tmp_path)

    # both ranks scored whole pairs (G rollouts on each side in one reward call), and not the same pairs
    audits = {f.stem: [json.loads(line) for line in f.read_text().splitlines()]
              for f in sorted((tmp_path / "pairs").glob("rank-*.jsonl"))}
    assert sorted(audits) == ["rank-0", "rank-1"], f"expected one process per machine, audit: {list(audits)}"
    for calls in audits.values():
        assert len(calls) == 2 and all(c == r == GENERATIONS for call in calls for c, r in call["pairs"].values())
    seen = [{p for call in audits[r] for p in call["pairs"]} for r in ("rank-0", "rank-1")]
    assert seen[0] and seen[1] and not seen[0] & seen[1], f"the ranks scored the same pairs: {seen}"

    # the two ranks hold bit-equal weights after the steps, moved from the start, and that is what was saved
    ranks = [json.loads((tmp_path / "weights" / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert [r["step"] for r in ranks] == [2, 2]
    assert ranks[0]["weights"] == ranks[1]["weights"]
    start, saved = _fingerprint_of_folder(sft_judge), _fingerprint_of_folder(out)
    common = start.keys() & ranks[0]["weights"].keys()
    assert len(common) >= len(ranks[0]["weights"]) - 1  # DeepSpeed may list a tied lm_head on its own
    assert any(start[k][0] != ranks[0]["weights"][k][0] for k in common), "no weight moved: the steps did nothing"
    assert all(saved[k][0] == ranks[0]["weights"][k][0] for k in common & saved.keys())
