import pytest

from itemeval.scoring import ParseCode, parse_judge_output


def test_last_fenced_block_wins():
    text = (
        'Draft: ```json\n{"score": 0, "reasoning": "first"}\n```\n'
        'Final: ```json\n{"score": 1, "reasoning": "second"}\n```'
    )
    verdict = parse_judge_output(text)
    assert verdict.ok and verdict.score == 1.0 and verdict.reasoning == "second"


def test_fenced_block_without_language_tag():
    assert parse_judge_output('```\n{"score": 7.5}\n```').score == 7.5


def test_raw_object_when_no_fence():
    verdict = parse_judge_output('I think it is right. {"score": 1, "reasoning": "ok {x}"}')
    assert verdict.ok and verdict.score == 1.0 and verdict.reasoning == "ok {x}"


def test_fenced_without_score_falls_back_to_raw_object_with_score():
    text = '```json\n{"note": "x"}\n```\nthen {"score": 0}'
    assert parse_judge_output(text).score == 0.0


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("The answer is correct. Score: 1", ParseCode.NO_JSON_OBJECT),
        ("```json\n{score: 1}\n```", ParseCode.NO_JSON_OBJECT),
        ("```json\n[1, 2]\n```", ParseCode.NO_JSON_OBJECT),
        ('```json\n{"grade": 1}\n```', ParseCode.NO_SCORE_IN_JSON),
        ('```json\n{"score": "1"}\n```', ParseCode.SCORE_NOT_NUMERIC),
        ('```json\n{"score": true}\n```', ParseCode.SCORE_NOT_NUMERIC),
        ('```json\n{"score": null}\n```', ParseCode.SCORE_NOT_NUMERIC),
        ('```json\n{"score": NaN}\n```', ParseCode.SCORE_NOT_FINITE),
        ('{"score": Infinity}', ParseCode.SCORE_NOT_FINITE),
        ("", ParseCode.NO_JSON_OBJECT),
    ],
)
def test_failure_codes(text, code):
    verdict = parse_judge_output(text)
    assert not verdict.ok
    assert verdict.code == code
    assert verdict.score is None
