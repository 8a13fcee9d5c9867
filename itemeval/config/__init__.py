"""The study file: its models, loading with precise errors, and the checks across sections.

The public names are the ones below; the modules are private:

* `_models`    the study YAML as strict pydantic models (`StudyConfig` and its sections), paths
* `_loading`   `load_study` (a YAML file) and `study_from_mapping` (a dict): validated, or a
               `ConfigError` naming file, line and field
* `_checks`    `cross_check` (references, duplicates, templates, scorers) and `check_keys`
* `_problems`  pydantic's validation errors as `Problem`s, with the nearest valid key

The line of a field in a YAML text comes from `itemeval._util.yaml_lines` (prompt files use it too).
"""

from itemeval.config._checks import check_keys, cross_check
from itemeval.config._loading import load_study, study_from_mapping
from itemeval.config._models import (
    Adaptive,
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
    "Adaptive",
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
