import pytest

from itemeval.datasets import WorkItem
from itemeval.errors import ConfigError
from itemeval.templates import _answer_formats as answer_formats
from itemeval.templates import builtin_names, load_template


def item(**kw):
    base = dict(
        id="q1", input="Compute {x} when $\\frac{1}{2}$", target="18", modality="single-value"
    )
    base.update(kw)
    return WorkItem(**base)


def test_builtin_and_local_namespaces_are_distinct(tmp_path):
    (tmp_path / "direct.txt").write_text("LOCAL {{ input }}\n")
    builtin = load_template("builtin:direct", "prompt", tmp_path)
    local = load_template("direct", "prompt", tmp_path)
    assert builtin.sha256 != local.sha256
    assert local.render_prompt(item())[-1]["content"].startswith("LOCAL ")
    assert builtin.source.startswith("package:")


def test_editing_a_local_template_changes_its_hash(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("{{ input }}\n")
    first = load_template("mine", "prompt", tmp_path).sha256
    path.write_text("{{ input }}\nBe concise.\n")
    assert load_template("mine", "prompt", tmp_path).sha256 != first


def test_rendering_is_brace_safe_and_task_prompt_is_system_message():
    template = load_template("builtin:direct", "prompt")
    messages = template.render_prompt(item(task_prompt="You are {terse}."))
    assert messages[0] == {"role": "system", "content": "You are {terse}."}
    assert "Compute {x} when $\\frac{1}{2}$" in messages[1]["content"]
    assert "final number only" in messages[1]["content"]


@pytest.mark.parametrize(
    ("modality", "target", "phrase"),
    [
        ("choiceof3", "B", "one of A, B, C)."),
        ("choiceof10", "J", "one of A, B, C, D, E, F, G, H, I, J)."),
        (
            "choiceof26",
            "Z",
            "one of A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q, R, S, T, U, V, W, X, Y, Z).",
        ),
        ("boolean", "True", "True or False only"),
        ("ternary", "False", "I don't know"),
        ("single-value", "12", "number"),
        ("cloze", "hope", "fill the blank"),
        ("short-prose", "Paris", "few words"),
    ],
)
def test_answer_instructions_follow_modality(modality, target, phrase):
    template = load_template("builtin:direct", "prompt")
    content = template.render_prompt(item(modality=modality, target=target))[-1]["content"]
    assert phrase in content


@pytest.mark.parametrize(
    "modality",
    [None, "single-value", "short-prose", "long-prose", "choiceof4", "boolean", "ternary", "cloze"],
)
@pytest.mark.parametrize("target", ["12", "1,450,000", "$4", "12%", "Paris", "", "B"])
def test_answer_texts_are_those_of_the_answer_kind(modality, target):
    kind = answer_formats.answer_kind(modality, target)
    letters = answer_formats.choice_letters(modality)
    expected = (
        answer_formats._INSTRUCTIONS[kind].format(letters=letters),
        answer_formats._FORMATS[kind].format(letters=letters),
        letters,
    )
    assert answer_formats.answer_texts(modality, target) == expected


def test_chain_of_thought_asks_for_a_letter_up_to_the_last_choice():
    template = load_template("builtin:cot", "prompt")
    content = template.render_prompt(item(modality="choiceof10", target="J"))[-1]["content"]
    assert "the letter of the correct choice (one of A, B, C, D, E, F, G, H, I, J)" in content


def test_answer_texts_of_a_choice_item_do_not_read_its_target():
    assert answer_formats.answer_texts("choiceof3", 5)[2] == "A, B, C"  # type: ignore[arg-type]


def test_prompt_templates_cannot_see_the_target(tmp_path):
    (tmp_path / "leak.txt").write_text("{{ input }} (answer: {{ target }})")
    with pytest.raises(ConfigError, match="target"):
        load_template("leak", "prompt", tmp_path)


def test_missing_templates_suggest_names(tmp_path):
    with pytest.raises(ConfigError, match="builtin:direct"):
        load_template("builtin:dirct", "prompt")
    with pytest.raises(ConfigError, match="not found"):
        load_template("nothere", "rubric", tmp_path)


def test_rubric_needs_response_and_gets_judge_suffix(tmp_path):
    (tmp_path / "bad.txt").write_text("Q: {{ input }}")
    with pytest.raises(ConfigError, match="response"):
        load_template("bad", "rubric", tmp_path)
    rubric = load_template("builtin:correctness", "rubric")
    messages = rubric.render_rubric(item(), "The answer is {{ target }} 17")
    assert "The answer is {{ target }} 17" in messages[-1]["content"]
    assert '"score"' in messages[-1]["content"]
    assert rubric.max_score == 1.0 and rubric.pass_score == 1.0


def test_graded_rubric_front_matter():
    rubric = load_template("builtin:graded", "rubric")
    assert (rubric.max_score, rubric.pass_score) == (10.0, 5.0)
    assert not rubric.text.startswith("---")
    assert "builtin:graded" in builtin_names("rubric")
