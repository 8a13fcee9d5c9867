"""Generated item-format datasets for the benchmarks (written under /tmp, never committed)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml


def write_dataset(folder: Path, items: int, *, kind: str = "mixed") -> None:
    """`items` items in the item format under `folder`: `mixed` alternates choiceof4 and
    single-value numeric items; `arithmetic` is single-value sums only (prompts repeat every
    8,633 items, so the response cache answers repeats); `unique` is sums whose every prompt
    differs (every item is a call)."""
    name = folder.name
    folder.mkdir(parents=True)
    meta = {
        "identifier": name,
        "title": f"generated {kind} items",
        "description": f"generated {kind} items for benchmarks",
        "creator": "itemeval benchmarks",
        "publisher": "itemeval",
        "created": "2026-11-22",
        "language": "eng",
        "license": "CC0-1.0",
        "source": "generated",
        "subject": "arithmetic",
        "hasPart": [f"{name}.jsonl"],
    }
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(meta))
    with open(folder / f"{name}.jsonl", "w") as handle:
        for i in range(items):
            if kind == "mixed" and i % 2:
                item = {
                    "identifier": f"{name}.{i}",
                    "modality": "choiceof4",
                    "prompt": f"Which number is {i % 7}?\nA. {i % 7}\nB. {i % 7 + 1}\n"
                    f"C. {i % 7 + 2}\nD. {i % 7 + 3}",
                    "response": "A",
                }
            elif kind == "unique":
                item = {
                    "identifier": f"{name}.{i}",
                    "modality": "single-value",
                    "prompt": f"What is {i} plus {i % 89}?",
                    "response": str(i + i % 89),
                }
            else:
                a, b = i % 97, (i * 7) % 89
                item = {
                    "identifier": f"{name}.{i}",
                    "modality": "single-value",
                    "prompt": f"What is {a} plus {b}?",
                    "response": str(a + b),
                }
            item["difficulty"] = (i % 10) / 10
            handle.write(json.dumps(item) + "\n")
