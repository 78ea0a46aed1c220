"""The GSM8K skill recipe (`patarm quickstart --recipe gsm8k-skill`): a real pretrained judge (SmolLM2-135M-Instruct)
trained with PaTaRM on real GSM8K solutions to use a skill — the reference answer mounted as a per-sample resource
— and measured as a best-of-4 selector. `data` (pool, split, pairs), `prompts` (the skill prompt builder),
`teacher` (the verifier teacher), `stages` (corpus, RL set, BT), `evaluate`, `metrics`, `recipe`, `report`."""
