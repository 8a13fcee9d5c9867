"""itemeval: distributed, resumable, budget-safe LLM benchmark evaluations on Ray."""

__version__ = "0.1.0"
