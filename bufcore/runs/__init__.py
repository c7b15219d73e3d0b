"""Training runs: the demo run (and, later, run logs)."""
