"""The IFEval downstream recipe (`patarm downstream --recipe ifeval`): a real policy (SmolLM2-135M-Instruct by
default) trained with GRPO on verifiable Alpaca + IFEval-constraint prompts, rewarded by a PaTaRM judge trained
here, a BT model or the checkers, and measured on the official IFEval. `prompts` (the verifiable prompts),
`pairs` (policy samples labelled by the checkers), `teacher` (the checker-backed judge teacher), `recipe` (the
stages)."""
