"""Import records: `imports/<import_id>.json`, what each import read and wrote.

`itemeval import` writes them (`itemeval.importing`); planning reads them, to give a study's
`imported:` conditions to its design (and `importing.store_plan` reads them for a store alone).

An import's record is written last, once its rows, items, snapshot and lock are stored: a store
lists an imported condition only through a record (`read_imports`), so an import that failed
half way shows nothing (and its fragments are removed). The record holds the provenance of
every row the import wrote (their `run_id` is the import id; their `request_id` the record's
place in its file): the files with their tool, version and sha256, the conditions with what the
source stated, the datasets, the counts and the rejections by reason.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from itemeval import __version__
from itemeval.errors import Problem, StoreError
from itemeval.store import StudyStore

IMPORTS_DIR = "imports"
RECORD_FORMAT: Final = "itemeval-import/1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FileRecord(_Model):
    path: str
    tool: str
    version: str | None = None
    sha256: str


class GenerateRecord(_Model):
    id: str
    slug: str
    tool: str
    model_id: str
    model_name: str
    params: dict[str, Any] = Field(default_factory=dict)
    prompt_name: str
    prompt_text: str | None = None
    config_name: str = "imported"
    #: the task or scenario the source ran (None: records that do not state one)
    task: str | None = None
    #: the payload a native condition with the same model, params and prompt would hash
    native_payload: dict[str, Any] = Field(default_factory=dict)

    @property
    def imported_payload(self) -> dict[str, Any]:
        """What marks the condition as imported in its payload (its tool, and task)."""
        return {"tool": self.tool} | ({"task": self.task} if self.task is not None else {})


class GradeRecord(_Model):
    id: str
    slug: str
    tool: str
    metric: str
    kind: Literal["scorer", "judge"] = "scorer"
    grader_model: str | None = None
    rubric_name: str | None = None
    rubric_text: str | None = None
    pass_score: float | None = None
    max_score: float | None = None


class ImportRecord(_Model):
    format: Literal["itemeval-import/1"] = RECORD_FORMAT
    import_id: str
    started_at: datetime
    ended_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    itemeval_version: str = __version__
    sources: list[str] = Field(default_factory=list)
    study: str | None = None  # the study named by the source, when it names one
    files: list[FileRecord] = Field(default_factory=list)
    generate: list[GenerateRecord] = Field(default_factory=list)
    grade: list[GradeRecord] = Field(default_factory=list)
    datasets: dict[str, str] = Field(default_factory=dict)  # name -> fingerprint
    epochs: int = 1
    samples: int = 0
    solutions: int = 0
    grades: int = 0
    rejected: dict[str, int] = Field(default_factory=dict)
    #: scores stated by aggregate records without instance rows (kept, not graded items)
    aggregates: list[dict[str, Any]] = Field(default_factory=list)


def read_imports(store: StudyStore) -> list[ImportRecord]:
    """Every import record of the store, oldest first."""
    directory = store.root.join(IMPORTS_DIR)
    directory.invalidate()
    try:
        names = sorted(n for n in directory.listdir() if n.endswith(".json"))
    except FileNotFoundError:
        return []
    records = []
    for name in names:
        location = directory.join(name)
        try:
            records.append(ImportRecord.model_validate(json.loads(location.read_text())))
        except (ValueError, ValidationError) as exc:
            raise StoreError(
                Problem(f"not a valid import record: {str(exc).splitlines()[0]}", file=location.url)
            ) from None
    return records
