"""Reward adapters for RL frameworks, each a thin client of `patarm serve` (or of a judge in-process):

* `patarm.serve.adapters.trl.JudgeReward`      — a TRL reward function for `GRPOTrainer(reward_funcs=[...])`;
* `patarm.serve.adapters.verl.compute_score`   — verl's `custom_reward_function` (and `compute_score_batch`);
* `patarm.serve.adapters.openrlhf.reward_func` — OpenRLHF's `--remote_rm_url reward_func.py` (with a token),
  or point `--remote_rm_url` at `http://HOST:PORT/get_reward` directly.
"""
