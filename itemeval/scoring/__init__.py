"""Scoring: answer extraction, verifiable scorers and the judge-output parser (pure functions)."""

from itemeval.scoring.extract import answer_span, extract_answer
from itemeval.scoring.judge import JudgeVerdict, ParseCode, parse_judge_output
from itemeval.scoring.verifiable import SCORER_VERSION, SCORERS, Score, auto_scorer_for, score

__all__ = [
    "SCORERS",
    "SCORER_VERSION",
    "JudgeVerdict",
    "ParseCode",
    "Score",
    "answer_span",
    "auto_scorer_for",
    "extract_answer",
    "parse_judge_output",
    "score",
]
