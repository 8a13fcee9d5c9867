"""Scoring: answer extraction, verifiable scorers, custom scorers and the judge-output parser.

The public names are the ones below (`from itemeval.scoring import Score, scorer`); a scorer
plugin needs nothing else. The modules are private:

* `_extract`     the answer span (`ANSWER:` line) and its reading by modality
* `_verifiable`  the built-in scorers (`exact_match`, `multiple_choice`, `numeric`, `token_f1`,
                 `auto`)
* `_custom`      scorer plugins, their identity in condition ids, and `score` (any scorer)
* `_judge`       the strict judge-output parsers (structured and text) and the text guards
"""

from itemeval.scoring._custom import (
    ScorerError,
    ScorerIdentity,
    ScorerSpec,
    score,
    scorer,
    scorer_identity,
)
from itemeval.scoring._extract import answer_span, extract_answer
from itemeval.scoring._judge import (
    VERDICT_SCHEMA,
    VERDICT_SCHEMA_NAME,
    JudgeVerdict,
    ParseCode,
    parse_judge_output,
    parse_structured_verdict,
)
from itemeval.scoring._verifiable import SCORER_VERSION, SCORERS, Score, auto_scorer_for

__all__ = [
    "SCORERS",
    "SCORER_VERSION",
    "VERDICT_SCHEMA",
    "VERDICT_SCHEMA_NAME",
    "JudgeVerdict",
    "ParseCode",
    "Score",
    "ScorerError",
    "ScorerIdentity",
    "ScorerSpec",
    "answer_span",
    "auto_scorer_for",
    "extract_answer",
    "parse_judge_output",
    "parse_structured_verdict",
    "score",
    "scorer",
    "scorer_identity",
]
