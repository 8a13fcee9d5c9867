"""A study from a YAML file or from a mapping: validated, cross-checked, or a `ConfigError`.

`load_study` either returns a study that can be planned or raises `ConfigError` listing every
problem, before anything is written; errors name the file, the line and the field path.
`study_from_mapping` does the same for a study built in Python (a notebook, a sweep script):
there is no file, so errors name the field path only, and relative input paths resolve against
`base_dir` (default: the working directory).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from itemeval._util.yaml_lines import YamlLines
from itemeval.config._checks import cross_check
from itemeval.config._models import StudyConfig
from itemeval.config._problems import validation_problems
from itemeval.errors import ConfigError, Problem
from itemeval.ids import canonical_json, sha256_hex
from itemeval.templates._messages import load_yaml


def load_study(path: str | os.PathLike[str]) -> StudyConfig:
    """Read, validate and cross-check a study file; raise `ConfigError` listing every problem."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(
            Problem("study file not found", file=str(file), hint="`itemeval init` writes one")
        )
    raw = file.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            Problem(f"not UTF-8 text (byte {exc.start})", file=str(file), hint="save it as UTF-8")
        ) from None
    data = load_yaml(text, str(file))
    if not isinstance(data, dict):
        raise ConfigError(Problem("a study file must be a YAML mapping", file=str(file)))
    return _validated(
        data,
        base_dir=file.resolve().parent,
        path=file.resolve(),
        content_hash=sha256_hex(raw),
        lines=YamlLines(text),
    )


def study_from_mapping(
    data: Mapping[str, Any], *, base_dir: str | os.PathLike[str] | None = None
) -> StudyConfig:
    """Validate and cross-check a study given as a mapping (what a study file would hold).

    Raises `ConfigError` listing every problem, each naming its field path."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            Problem(f"a study must be a mapping, not {type(data).__name__}", field="(study)")
        )
    try:
        digest = sha256_hex(canonical_json(dict(data)))
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            Problem(
                f"the study holds a value that is not plain data: {exc}",
                field="(study)",
                hint="use str, int, float, bool, None, lists and dicts, as a YAML file would",
            )
        ) from None
    folder = Path(base_dir) if base_dir is not None else Path.cwd()
    return _validated(dict(data), base_dir=folder.resolve(), path=None, content_hash=digest)


def _validated(
    data: dict[str, Any],
    *,
    base_dir: Path,
    path: Path | None,
    content_hash: str,
    lines: YamlLines | None = None,
) -> StudyConfig:
    file = str(path) if path is not None else None
    try:
        study = StudyConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc, StudyConfig, file=file, lines=lines)) from None
    study._base_dir = base_dir
    study._path = path
    study._content_hash = content_hash
    problems = cross_check(study)
    if lines is not None:
        for problem in problems:
            object.__setattr__(problem, "line", problem.line or lines.line_of(problem.field))
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise ConfigError([_with_file(p, file) for p in errors])
    return study


def _with_file(problem: Problem, file: str | None) -> Problem:
    if problem.file or file is None:
        return problem
    return Problem(
        problem.message,
        file=file,
        line=problem.line,
        item=problem.item,
        field=problem.field,
        hint=problem.hint,
        severity=problem.severity,
    )
