import pytest

from itemeval.render import TemplateFieldError, check, placeholders, render


def test_values_with_braces_are_copied_verbatim():
    template = 'Solve: {{ input }}\nReply as JSON like {"answer": 1}.'
    value = r"\frac{a}{b} + {{ target }} {x} }}{{"
    out = render(template, {"input": value, "target": "SECRET"})
    assert value in out
    assert "SECRET" not in out
    assert out.endswith('{"answer": 1}.')


def test_dotted_lookup_and_none():
    assert render("{{a.b}}-{{ c }}", {"a": {"b": 2}, "c": None}) == "2-"


def test_a_dotted_name_walks_the_mappings_even_beside_a_flat_key_of_that_spelling():
    # A dataset row may have a column named "a.b"; `{{ a.b }}` still means values["a"]["b"].
    assert render("{{ a.b }}", {"a.b": "flat", "a": {"b": "nested"}}) == "nested"
    with pytest.raises(TemplateFieldError):
        render("{{ a.b }}", {"a.b": "flat"})


def test_unknown_field_names_alternatives():
    with pytest.raises(TemplateFieldError) as info:
        render("{{ nope }}", {"input": "x"})
    assert "nope" in str(info.value) and "input" in str(info.value)


def test_placeholders_and_check():
    template = "{{input}} {{ metadata.subject }} {{input}} {{ x }} {single}"
    assert placeholders(template) == ["input", "metadata.subject", "x"]
    assert check(template, {"input", "metadata"}) == ["x"]
