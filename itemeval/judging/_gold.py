"""Gold verdicts: human labels from a file, and the stratified sample a person labels.

A labels file (CSV with a header, or JSON Lines) has one row per labelled answer:

| column | meaning |
| --- | --- |
| `item_id` | the item (required) |
| `condition` | the generate condition: its id or slug (with `epoch`) |
| `epoch` | the replication (default 0) |
| `answer_hash` | the answer's `text_hash` (instead of, or beside, `condition` and `epoch`) |
| `verdict` | `pass` or `fail` (also `1`/`0`, `true`/`false`, `yes`/`no`); empty: not yet |

A row with `answer_hash` and no `condition` labels every answer to the item with that text (the
same words are the same verdict, whichever condition wrote them). A row with both labels the
condition's answer only while it is still that text: a label of an answer generated again since
is stale and left out (counted). `sample_rows` draws the answers to label, stratified by
generate condition and dataset (proportional allocation, at least one from each stratum that
has answers, seeded), and `write_labels_file` writes them as CSV a person fills in.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from itemeval.errors import InputError, Problem

LABEL_COLUMNS = (
    "item_id",
    "dataset",
    "condition",
    "epoch",
    "answer_hash",
    "question",
    "target",
    "answer",
    "verdict",
)
_PASS = {"pass", "passed", "correct", "1", "true", "yes", "y"}
_FAIL = {"fail", "failed", "incorrect", "wrong", "0", "false", "no", "n"}


@dataclass(frozen=True)
class Labels:
    """Gold verdicts by answer key (sorted), and what did not apply."""

    keys: np.ndarray
    verdicts: np.ndarray  # 1.0 / 0.0
    rows: int  # labelled rows read
    stale: int  # labels of an answer generated again since
    unmatched: int  # labels of no answer in this plan's selection


def parse_verdict(value: Any, where: Problem) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    text = str(value).strip().lower()
    if not text:
        return None
    if text in _PASS:
        return 1.0
    if text in _FAIL:
        return 0.0
    raise InputError(
        Problem(
            f"verdict {value!r} is neither a pass nor a fail",
            file=where.file,
            line=where.line,
            field="verdict",
            hint="write pass or fail (or 1/0, true/false, yes/no); leave it empty if not labelled",
        )
    )


def read_label_rows(text: str, source: str) -> list[tuple[int, dict[str, Any]]]:
    """(line, row) of a CSV or JSON Lines labels file."""
    stripped = text.lstrip()
    rows: list[tuple[int, dict[str, Any]]] = []
    if source.endswith((".jsonl", ".json")) or stripped.startswith("{"):
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise InputError(
                    Problem(f"not a JSON object: {exc}", file=source, line=number)
                ) from None
            if not isinstance(row, dict):
                raise InputError(Problem("not a JSON object", file=source, line=number))
            rows.append((number, row))
        return rows
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or "item_id" not in reader.fieldnames:
        raise InputError(
            Problem(
                "a labels file needs a header with item_id and verdict",
                file=source,
                line=1,
                hint="start from the file `itemeval plan --gold-sample N` writes",
            )
        )
    for row in reader:
        rows.append((reader.line_num, dict(row)))
    return rows


def resolve_labels(
    rows: Iterable[tuple[int, Mapping[str, Any]]],
    source: str,
    *,
    conditions: Mapping[str, int],
    items: Mapping[str, int],
    epochs: int,
    answers: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    keys_of: Any,
) -> Labels:
    """Labels to answer keys. `conditions`: generate condition id and slug to its code;
    `items`: item id to its code; `answers`: (gen, item, epoch, text_hash) of every current
    answer; `keys_of(gen, item, epoch)`: the answers' keys."""
    gen, item, epoch, text_hash = answers
    by_hash: dict[tuple[int, str], list[int]] = {}
    current: dict[tuple[int, int, int], str] = {}
    for index, (g, i, e, h) in enumerate(zip(gen, item, epoch, text_hash, strict=True)):
        by_hash.setdefault((int(i), str(h)), []).append(index)
        current[(int(g), int(i), int(e))] = str(h)
    found: dict[int, float] = {}
    read = stale = unmatched = 0
    for line, row in rows:
        where = Problem("", file=source, line=line)
        verdict = parse_verdict(row.get("verdict"), where)
        if verdict is None:
            continue
        read += 1
        item_id = str(row.get("item_id") or "").strip()
        if not item_id:
            raise InputError(Problem("item_id is empty", file=source, line=line, field="item_id"))
        code = items.get(item_id)
        answer_hash = str(row.get("answer_hash") or "").strip()
        condition = str(row.get("condition") or "").strip()
        if code is None:
            unmatched += 1
            continue
        if condition:
            gen_code = conditions.get(condition)
            if gen_code is None:
                raise InputError(
                    Problem(
                        f"unknown generate condition {condition!r}",
                        file=source,
                        line=line,
                        field="condition",
                        hint="use a generate condition's id or slug (itemeval plan lists them)",
                    )
                )
            try:
                ep = int(row.get("epoch") or 0)
            except ValueError:
                raise InputError(
                    Problem("epoch is not a whole number", file=source, line=line, field="epoch")
                ) from None
            now = current.get((gen_code, code, ep))
            if now is None or ep >= epochs:
                unmatched += 1
                continue
            if answer_hash and answer_hash != now:
                stale += 1
                continue
            key = int(keys_of(np.array([gen_code]), np.array([code]), np.array([ep]))[0])
            found[key] = verdict
        elif answer_hash:
            hits = by_hash.get((code, answer_hash))
            if not hits:
                unmatched += 1
                continue
            keys = keys_of(gen[hits], item[hits], epoch[hits])
            for key in keys:
                found[int(key)] = verdict
        else:
            raise InputError(
                Problem(
                    "a label needs condition (and epoch) or answer_hash",
                    file=source,
                    line=line,
                    hint="say which answer the verdict is about",
                )
            )
    keys = np.array(sorted(found), dtype=np.int64)
    values = np.array([found[int(k)] for k in keys], dtype=float)
    return Labels(keys, values, read, stale, unmatched)


def sample_rows(strata: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Positions of `n` answers drawn without replacement, stratified by `strata` (one label per
    answer): proportional allocation by largest remainders, at least one per stratum."""
    rng = np.random.default_rng(seed)
    total = strata.size
    if n >= total:
        return np.arange(total)
    names, counts = np.unique(strata, return_counts=True)
    share = counts / total * n
    take = np.maximum(1, np.floor(share)).astype(int)
    take = np.minimum(take, counts)
    order = np.argsort(-(share - np.floor(share)))
    for index in order:
        if take.sum() >= n:
            break
        if take[index] < counts[index]:
            take[index] += 1
    chosen = []
    for name, k in zip(names, take, strict=True):
        members = np.flatnonzero(strata == name)
        chosen.append(rng.choice(members, size=int(k), replace=False))
    return np.sort(np.concatenate(chosen)) if chosen else np.empty(0, dtype=int)


def write_labels_file(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """The labelling file: CSV with `LABEL_COLUMNS`, `verdict` empty for a person to fill."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(LABEL_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({name: row.get(name, "") for name in LABEL_COLUMNS})
    return out.getvalue().encode("utf-8")
