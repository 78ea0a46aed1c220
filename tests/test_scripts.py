"""The launch scripts' dry-run mode (DRY_RUN=1) prints the exact commands they would run: checked word by word,
and by running the printed outer commands (srun's task, ssh's remote command) in dry-run mode and getting the
printed inner ones back. tests/train/test_multinode.py then runs the printed launches for real."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = ROOT / "scripts" / "launch_multinode.sh"
SLURM = ROOT / "scripts" / "slurm_grpo.sh"
ARGS = ["--config", "configs/grpo/tiny.yaml", "--run_name", "it's a run"]  # a quote and a space survive


def dry_run(script: Path, *args: str, **env: str) -> tuple[list[str], list[str]]:
    """(command lines, comment lines) that `script` prints under DRY_RUN=1."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "NNODES", "NODE_RANK", "HOSTS"))}
    proc = subprocess.run(["bash", str(script), *args], env={**clean, "DRY_RUN": "1", **env}, cwd="/",
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    return [line for line in lines if not line.startswith("#")], [line for line in lines if line.startswith("#")]


def accelerate_launch(rank: int, nodes: int, per_node: int, head: str, port: str) -> list[str]:
    return ["accelerate", "launch", "--config_file", "configs/accelerate/multi_node.yaml", "--num_machines", str(nodes),
            "--num_processes", str(nodes * per_node), "--machine_rank", str(rank), "--main_process_ip", head,
            "--main_process_port", port, "-m", "patarm", "grpo", *ARGS]


def test_launch_multinode_prints_this_nodes_launch():
    commands, comments = dry_run(LAUNCH, *ARGS, NNODES="2", NODE_RANK="1", MASTER_ADDR="10.0.0.1",
                                 MASTER_PORT="29511", GPUS_PER_NODE="4")
    assert [shlex.split(c) for c in commands] == [accelerate_launch(1, 2, 4, "10.0.0.1", "29511")]
    assert comments == ["# source .venv/bin/activate"]  # what it does first when it runs


def test_launch_multinode_with_torchrun_hands_deepspeed_to_the_trainer():
    commands, _ = dry_run(LAUNCH, *ARGS, NNODES="2", NODE_RANK="0", MASTER_ADDR="h0", LAUNCHER="torchrun", VENV="")
    assert [shlex.split(c) for c in commands] == [[
        "torchrun", "--nnodes", "2", "--nproc_per_node", "8", "--node_rank", "0", "--master_addr", "h0",
        "--master_port", "29500", "-m", "patarm", "grpo", *ARGS, "--deepspeed", "configs/deepspeed/zero3.json"]]


def test_launch_multinode_over_ssh_prints_each_hosts_command_and_launch():
    commands, comments = dry_run(LAUNCH, *ARGS, HOSTS="node-a node-b", MASTER_PORT="29600", GPUS_PER_NODE="2")
    assert len(commands) == 2
    for rank, (host, line) in enumerate(zip(["node-a", "node-b"], commands)):
        words = shlex.split(line)
        assert words[:2] == ["ssh", host] and words[-4:] == [">", f"logs/{host}.log", "2>&1", "&"]
        remote = words[2]
        assert f"NODE_RANK={rank} " in remote and "MASTER_ADDR=node-a " in remote and "NNODES=2 " in remote
        # the remote command, run here in dry-run mode, prints the launch the listing shows for this host
        proc = subprocess.run(["bash", "-c", remote], env={**os.environ, "DRY_RUN": "1"}, capture_output=True,
                              text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        launch = [ln for ln in proc.stdout.splitlines() if not ln.startswith("#")]
        assert f"# on {host}: {launch[0]}" in comments
        assert shlex.split(launch[0]) == accelerate_launch(rank, 2, 2, "node-a", "29600")


def test_launch_multinode_without_a_rank_says_what_to_set():
    proc = subprocess.run(["bash", str(LAUNCH)], env={**os.environ, "DRY_RUN": "1"}, capture_output=True, text=True)
    assert proc.returncode != 0 and "set NNODES (or HOSTS)" in proc.stderr


def test_slurm_prints_srun_and_the_launch_of_every_node():
    commands, comments = dry_run(SLURM, *ARGS, SLURM_NNODES="3", MAIN_PROCESS_IP="gpu-017", GPUS_PER_NODE="8")
    (srun,) = commands
    words = shlex.split(srun)
    assert words[:6] == ["srun", "--nodes=3", "--ntasks=3", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "bash"]
    assert words[6] == "-c" and words[8:] == ["patarm-launch", *ARGS]
    node_lines = [c for c in comments if c.startswith("# node ")]
    assert len(node_lines) == 3
    for node, line in enumerate(node_lines):
        printed = line.split(": ", 1)[1]
        assert shlex.split(printed) == accelerate_launch(node, 3, 8, "gpu-017", "29500")
        # what srun's task prints on node N (its own SLURM_NODEID) is that line, word for word
        env = {**os.environ, "DRY_RUN": "1", "SLURM_NODEID": str(node), "NNODES": "3", "GPUS_PER_NODE": "8",
               "ACCELERATE_CONFIG": "configs/accelerate/multi_node.yaml", "MAIN_PROCESS_IP": "gpu-017",
               "MAIN_PROCESS_PORT": "29500", "STAGE": "grpo"}
        task = subprocess.run(["bash", "-c", words[7], *words[8:]], env=env, capture_output=True, text=True)
        assert shlex.split(task.stdout) == shlex.split(printed), task.stderr


@pytest.mark.parametrize("script", [LAUNCH, SLURM], ids=lambda p: p.name)
def test_dry_run_touches_nothing(tmp_path, script):
    """A dry run neither creates logs/ nor needs the venv it names."""
    before = (ROOT / "logs").exists()
    dry_run(script, *ARGS, NNODES="2", NODE_RANK="0", MASTER_ADDR="h", SLURM_NNODES="2", MAIN_PROCESS_IP="h",
            VENV=str(tmp_path / "no-such-venv"))
    assert (ROOT / "logs").exists() == before


def test_gsm8k_gpu_check_runs_the_cpu_default_on_a_gpu(tmp_path):
    """scripts/gsm8k_gpu_check.sh: the stage configs are the CPU default's with only `use_cpu: false, bf16: true`,
    and the recipe runs with judging on the GPU in bf16, the given flags last (they win)."""
    import yaml

    commands, _ = dry_run(ROOT / "scripts" / "gsm8k_gpu_check.sh", str(tmp_path / "run"), "--seeds", "0", "1")
    configs = tmp_path / "run" / "gpu-configs"
    for name in ("gsm8k-sft.yaml", "gsm8k-grpo.yaml", "gsm8k-grpo-par.yaml", "gsm8k-bt.yaml"):
        cpu = yaml.safe_load((ROOT / "patarm" / "demo" / "configs" / name).read_text())
        gpu = yaml.safe_load((configs / name).read_text())
        assert gpu == cpu | {"use_cpu": False, "bf16": True}, name
    [command] = [shlex.split(c) for c in commands]
    assert command[:4] == ["python3", "-m", "patarm", "quickstart"] and command[-3:] == ["--seeds", "0", "1"]
    flags = dict(zip(command[4:-3:2], command[5:-3:2]))
    assert flags["--recipe"] == "gsm8k-skill" and flags["--judge_device"] == "cuda"
    assert flags["--eval_dtype"] == "bfloat16"
    assert flags["--grpo_config"] == str(configs / "gsm8k-grpo.yaml") and flags["--run_dir"] == str(tmp_path / "run")
