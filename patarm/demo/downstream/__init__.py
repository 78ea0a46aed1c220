"""The downstream RLHF loop (`patarm downstream`, the paper's §4.3 in miniature): a policy trained with GRPO on the
judge, a Bradley-Terry reward model and the rule verifier, measured on held-out prompts. `config` (the options),
`task` (the policy's prompts and verifiers), `rewards` (the three reward functions), `train` (plain TRL GRPO of the
policy), `eval` (held-out measures), `loop` (the stages, in order), `report`."""
