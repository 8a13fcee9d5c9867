"""`--condition` selections: resolve what a user typed against the known condition ids.

A selection is, in the order tried: an exact condition id; an exact slug (the part before
`--`); a prefix of an id; a prefix of the 12-digit hash. Exactly one condition must match, or the
selection is an `InputError` listing the candidates. A selection with `*`, `?` or `[` is a glob
over ids and slugs and may match many (`--condition 'gpt-4o*'`).
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Sequence

from itemeval.errors import InputError, Problem

_GLOB = set("*?[")


def _slug(condition_id: str) -> str:
    return condition_id.rsplit("--", 1)[0]


def _hash(condition_id: str) -> str:
    parts = condition_id.rsplit("--", 1)
    return parts[1] if len(parts) == 2 else ""


def _matches(selection: str, known: Sequence[str]) -> list[str]:
    if _GLOB & set(selection):
        return [
            cid
            for cid in known
            if fnmatch.fnmatchcase(cid, selection) or fnmatch.fnmatchcase(_slug(cid), selection)
        ]
    for rule in (
        lambda cid: cid == selection,
        lambda cid: _slug(cid) == selection,
        lambda cid: cid.startswith(selection),
        lambda cid: _hash(cid).startswith(selection.lstrip("-")),
    ):
        found = [cid for cid in known if rule(cid)]
        if found:
            return found
    return []


def select_conditions(
    known: Sequence[str],
    selections: Sequence[str] | None,
    *,
    what: str = "condition",
    option: str = "--condition",
) -> list[str]:
    """The ids of `known` that `selections` name, in `known`'s order (all when none given)."""
    known = list(dict.fromkeys(known))
    if not selections:
        return known
    chosen: set[str] = set()
    problems: list[Problem] = []
    for selection in selections:
        found = _matches(selection, known) if selection.strip("-") else []
        globbing = bool(_GLOB & set(selection))
        if len(found) == 1 or (globbing and found):
            chosen.update(found)
        elif found:
            problems.append(
                Problem(
                    f"{option} {selection!r} matches {len(found)} {what}s: {', '.join(found[:20])}",
                    field=option,
                    hint="give more of the id, or a glob such as 'prefix*' to select them all",
                )
            )
        else:
            problems.append(
                Problem(
                    f"{option} {selection!r} matches no {what}",
                    field=option,
                    hint=_candidates_hint(selection, known, what),
                )
            )
    if problems:
        raise InputError(problems)
    return [cid for cid in known if cid in chosen]


def _candidates_hint(selection: str, known: list[str], what: str) -> str:
    if not known:
        return f"there are no {what}s"
    names = known + sorted({_slug(cid) for cid in known})
    close = difflib.get_close_matches(selection, names, n=5, cutoff=0.4)
    if close:
        return "did you mean " + ", ".join(close)
    shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
    return f"known {what}s: {shown}"
