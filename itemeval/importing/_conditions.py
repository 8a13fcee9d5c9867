"""Imported answers beside a study's own conditions: what a report says of them
(`imported_notes`), and a native condition taking them over (`reuse_imported`). The imported
conditions themselves are planning's (`planning/_imported.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from itemeval.ids import sha256_hex
from itemeval.planning import Design, GenerateCondition
from itemeval.planning._import_records import read_imports
from itemeval.planning._imported import imported_generate
from itemeval.store import StudyStore


def imported_notes(design: Design) -> list[str]:
    """What a report says about the imported generate conditions of `design`: where each came
    from, and which native condition has the same model, sampling parameters and prompt (the
    prompt's text when both are known, else its name). A run of that native condition does not
    reuse the imported answers: their ids differ."""
    imported = [c for c in design.generate if "imported" in c.payload]
    native = [c for c in design.generate if "imported" not in c.payload]
    notes = []
    for condition in imported:
        tool = condition.payload["imported"].get("tool", "?")
        same = [n for n in native if _same_content(condition, n)]
        if same:
            names = ", ".join(n.slug for n in same)
            notes.append(
                f"{condition.slug} (imported from {tool}) has the same model, parameters and "
                f"prompt as {names}: two measurements of one condition, side by side (a run "
                "of the native condition does not reuse the imported answers)"
            )
        else:
            notes.append(f"{condition.slug}: imported from {tool}")
    return notes


def _same_content(imported: GenerateCondition, native: GenerateCondition) -> bool:
    if imported.model_id != native.model_id:
        return False
    if imported.params.as_dict() != native.params.as_dict():
        return False
    stated = (imported.payload.get("prompt") or {}).get("sha256")
    if stated and native.prompt.text:  # the texts, by their sha256
        return bool(stated == sha256_hex(native.prompt.text))
    return imported.prompt.name == native.prompt.name


@dataclass(frozen=True)
class Reused:
    """Imported answers a native condition took over (`reuse_imported`)."""

    imported: str
    native: str
    rows: int


def reuse_imported(design: Design, store: StudyStore) -> list[Reused]:
    """Copy the answers of each imported generate condition into every native condition of
    `design` with the same model, parameters and prompt (`imported_notes`' rule), for the
    cells the native condition does not hold yet; the copies keep their provenance (`run_id`
    is the import's id). What `run --reuse-imported` does before it plans: never by default."""
    from itemeval.store import SOLUTIONS

    imported = [imported_generate(g) for r in read_imports(store) for g in r.generate]
    native = [c for c in design.generate if "imported" not in c.payload]
    done: list[Reused] = []
    for source in imported:
        for target in (n for n in native if _same_content(source, n)):
            rows = store.read_by_condition(SOLUTIONS, [source.id, target.id])
            have = rows[target.id]
            table = rows[source.id]
            if have.num_rows:
                held = {
                    (i, e)
                    for i, e in zip(
                        have.column("item_id").to_pylist(),
                        have.column("epoch").to_pylist(),
                        strict=True,
                    )
                }
                keep = [
                    (i, e) not in held
                    for i, e in zip(
                        table.column("item_id").to_pylist(),
                        table.column("epoch").to_pylist(),
                        strict=True,
                    )
                ]
                table = table.filter(keep)
            if table.num_rows:
                store.write(SOLUTIONS, target.id, table.select(SOLUTIONS.schema.names))
            done.append(Reused(source.id, target.id, table.num_rows))
    return done
