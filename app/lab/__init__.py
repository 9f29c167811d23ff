"""The Lab: does a pair pay off on my prompts? Suites, configurations, runs, evidence (no Qt)."""
