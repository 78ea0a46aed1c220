"""Data construction (PaTaRM Appendix C): teacher-judged SFT corpora and the rejection-sampled RL set."""
