"""The study file: its models, loading with precise errors, and the checks across sections.

* `models`    the study YAML as strict pydantic models (`StudyConfig` and its sections), paths
* `loading`   `load_study` (a YAML file) and `study_from_mapping` (a dict): validated, or a
              `ConfigError` naming file, line and field
* `checks`    `cross_check` (references, duplicates, templates, scorers) and `check_keys`
* `problems`  pydantic's validation errors as `Problem`s, with the nearest valid key

The line of a field in a YAML text comes from `itemeval._util.yaml_lines` (prompt files use it too).
"""

from itemeval.config.checks import check_keys, cross_check
from itemeval.config.loading import load_study, study_from_mapping
from itemeval.config.models import (
    Budget,
    Cache,
    Facets,
    Grader,
    ModelConfig,
    ModelEntry,
    Runtime,
    Sampling,
    StrictModel,
    StudyConfig,
    resolve_sampling,
)

__all__ = [
    "Budget",
    "Cache",
    "Facets",
    "Grader",
    "ModelConfig",
    "ModelEntry",
    "Runtime",
    "Sampling",
    "StrictModel",
    "StudyConfig",
    "check_keys",
    "cross_check",
    "load_study",
    "resolve_sampling",
    "study_from_mapping",
]
