"""Plumbing every layer may use, no concept of its own (private: not part of the public API).

- `yaml_lines.py`: `safe_load` for every YAML text itemeval reads, and `YamlLines`, the line of
  a field path in a YAML text, for error messages
- `heap.py`: the process heap during a run (the garbage collector's pace, malloc arenas, free
  pages handed back)
- `arrow_start.py`: pyarrow at a command's start without importing pandas
- `redaction.py`: secrets scrubbed from text (`itemeval.secrets.redact`; `itemeval.errors` uses it)

This file imports nothing, so that `cli.main` can reach `arrow_start` before anything heavy.
"""
