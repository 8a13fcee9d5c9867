"""An import's record as it is written (`imports/<import_id>.json`, the format is planning's
`_import_records`, which reads it): the records of the files read and the conditions found."""

from __future__ import annotations

from itemeval.errors import Problem, StoreError
from itemeval.importing._model import GenerateFacts, GradeFacts, SourceFile
from itemeval.planning._import_records import (
    IMPORTS_DIR,
    FileRecord,
    GenerateRecord,
    GradeRecord,
    ImportRecord,
    read_imports,
)
from itemeval.store import StudyStore

__all__ = [
    "FileRecord",
    "GenerateRecord",
    "GradeRecord",
    "ImportRecord",
    "file_record",
    "generate_record",
    "grade_record",
    "read_imports",
    "write_import",
]


def generate_record(facts: GenerateFacts) -> GenerateRecord:
    condition = facts.id
    return GenerateRecord(
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


def grade_record(facts: GradeFacts) -> GradeRecord:
    condition = facts.id
    return GradeRecord(
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


def file_record(source: SourceFile) -> FileRecord:
    return FileRecord(
        path=source.path, tool=source.tool, version=source.version, sha256=source.sha256
    )


def write_import(store: StudyStore, record: ImportRecord) -> str:
    location = store.root.join(IMPORTS_DIR, f"{record.import_id}.json")
    if not location.create_exclusive(record.model_dump_json(indent=2).encode("utf-8")):
        raise StoreError(Problem("an import with this id exists already", file=location.url))
    return location.url
