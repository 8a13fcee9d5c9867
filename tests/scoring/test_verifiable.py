import pytest

from itemeval.scoring import auto_scorer_for, extract_answer, score


@pytest.mark.parametrize(
    ("text", "target", "modality", "correct", "extracted"),
    [
        ("B", "B", "choiceof4", True, "B"),
        ("The answer is (c).", "C", "choiceof4", True, "C"),
        ("Reasoning...\nANSWER: D", "D", "choiceof4", True, "D"),
        ("A) Paris", "A", "choiceof4", True, "A"),
        ("E", "E", "choiceof4", False, None),  # outside the first four letters
        ("It is a hard one, but B.", "B", "choiceof4", True, "B"),
        ("true", "True", "boolean", True, "True"),
        ("No, that is wrong.", "False", "boolean", True, "False"),
        ("I don't know.", "I don't know", "ternary", True, "I don't know"),
        ("So she makes $18 a day.\nANSWER: 18", "18", "single-value", True, "18"),
        ("ANSWER: 1,450,000", "1450000", "single-value", True, "1450000"),
        ("ANSWER: 18.0", "18", None, True, "18"),
        ("ANSWER: 17", "18", "single-value", False, "17"),
        ("Paris.", "paris", "single-value", True, "Paris"),
        ("faith", "faith", "cloze", True, "faith"),
    ],
)
def test_auto_scorer(text, target, modality, correct, extracted):
    result = score("auto", text, target, modality)
    assert result.correct is correct
    assert result.extracted == extracted
    assert result.score == (1.0 if correct else 0.0)


def test_auto_picks_scorer_by_modality_and_target():
    assert auto_scorer_for("choiceof3", "A") == "multiple_choice"
    assert auto_scorer_for("boolean", "True") == "multiple_choice"
    assert auto_scorer_for("single-value", "42") == "numeric"
    assert auto_scorer_for("single-value", "Paris") == "exact_match"
    assert auto_scorer_for("cloze", "hope") == "exact_match"
    assert auto_scorer_for("short-prose", "the capital of France") == "token_f1"


def test_token_f1_partial_credit():
    result = score("token_f1", "the capital is Paris", "Paris", "short-prose")
    assert 0 < result.score < 1
    assert result.correct is True  # F1 = 2*(1/3*1)/(1/3+1) = 0.5
    assert score("token_f1", "London", "Paris", "short-prose").score == 0.0


def test_exact_match_normalises_articles_and_punctuation():
    assert score("exact_match", "The Nile!", "nile", None).correct
    assert not score("exact_match", "Nile river", "nile", None).correct


def test_numeric_tolerates_format_not_value():
    assert score("numeric", "$1,000.00", "1000", None).correct
    assert not score("numeric", "no number here", "1000", None).correct


def test_extract_answer_prefers_last_answer_line():
    text = "ANSWER: 3\nWait, recompute.\nANSWER: 4"
    assert extract_answer(text, "single-value", "4") == "4"
