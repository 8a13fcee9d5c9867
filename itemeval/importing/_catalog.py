"""Import records: `imports/<import_id>.json`, what each import read and wrote.

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
from itemeval.importing._model import GenerateFacts, GradeFacts, SourceFile
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

    @classmethod
    def of(cls, facts: GenerateFacts) -> GenerateRecord:
        condition = facts.id
        return cls(
            id=condition,
            slug=condition.rsplit("--", 1)[0],
            tool=facts.tool,
            model_id=facts.model_id,
            model_name=facts.model_name,
            params=facts.params_dict,
            prompt_name=facts.prompt_name,
            prompt_text=facts.prompt_text,
            config_name=facts.config_name,
            task=facts.task,
            native_payload=facts.native_payload(),
        )


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

    @classmethod
    def of(cls, facts: GradeFacts) -> GradeRecord:
        condition = facts.id
        return cls(
            id=condition,
            slug=condition.rsplit("--", 1)[0],
            tool=facts.tool,
            metric=facts.metric,
            kind="judge" if facts.kind == "judge" else "scorer",
            grader_model=facts.grader_model,
            rubric_name=facts.rubric_name,
            rubric_text=facts.rubric_text,
            pass_score=facts.pass_score,
            max_score=facts.max_score,
        )


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


def file_record(source: SourceFile) -> FileRecord:
    return FileRecord(
        path=source.path, tool=source.tool, version=source.version, sha256=source.sha256
    )


def write_import(store: StudyStore, record: ImportRecord) -> str:
    location = store.root.join(IMPORTS_DIR, f"{record.import_id}.json")
    if not location.create_exclusive(record.model_dump_json(indent=2).encode("utf-8")):
        raise StoreError(Problem("an import with this id exists already", file=location.url))
    return location.url


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
