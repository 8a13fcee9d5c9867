"""Bad mapped data and bad mappings: each message names the file, the line or item, the mapping
field or attribute, and what was expected."""

import pytest
from adapter_files import put, put_items_dataset, put_jsonl, put_parquet

from itemeval.datasets.adapters import (
    DatasetSource,
    StudyIds,
    check_unique_ids,
    load_mapping_file,
    open_source,
    parse_mapping,
)
from itemeval.errors import ConfigError, DatasetError


def read_all(source):
    handle = open_source(source)
    for _ in handle.iter_batches(100):
        pass


def error_text(source) -> str:
    with pytest.raises(DatasetError) as info:
        read_all(source)
    assert info.value.exit_code == 2
    return str(info.value)


def test_mapping_naming_a_missing_csv_column(tmp_path):
    put(str(tmp_path / "t.csv"), "question,answer\nWhat?,x\n")
    text = error_text(
        DatasetSource(
            path=str(tmp_path / "t.csv"), mapping={"input": "questoin", "target": "answer"}
        )
    )
    assert "t.csv:1" in text and "field 'mapping.input'" in text
    assert "'questoin'" in text and "its columns: question, answer" in text


def test_mapping_naming_a_missing_jsonl_key(tmp_path):
    put_jsonl(str(tmp_path / "t.jsonl"), [{"question": {"stem": "s"}, "answer": "a"}])
    text = error_text(
        DatasetSource(
            path=str(tmp_path / "t.jsonl"), mapping={"input_template": "{{ question.stm }}"}
        )
    )
    assert "t.jsonl:1" in text and "field 'mapping.input_template'" in text
    assert "'question.stm' not found" in text and "question" in text


def test_a_misnamed_column_hint_names_the_template_field(tmp_path):
    put_jsonl(str(tmp_path / "t.jsonl"), [{"question": "q?", "answer": "a"}])
    text = error_text(
        DatasetSource(
            path=str(tmp_path / "t.jsonl"),
            mapping={"input": "questoin", "target": "answer", "modality": "short-prose"},
        )
    )
    assert "field 'mapping.input'" in text
    assert '`input_template` a template such as "{{ questoin }}"' in text


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (
            "input",
            "{{ question }}",
            "write `input: question`, or `input_template: '{{ question }}'`",
        ),
        ("id", "q-{{ _index }}", "write `id: <column>`, or `id_template: 'q-{{ _index }}'`"),
        ("target", "{{ answer }}", "or `target_template: '{{ answer }}'`"),
        ("task_prompt_column", "{{ p }}", "or `task_prompt: '{{ p }}'`"),
        ("difficulty_column", "{{ d }}", "write `difficulty_column: d`"),
    ],
)
def test_a_template_in_a_column_field_names_the_template_field(field, value, expected):
    """The starter study once shipped `input: "{{ question }}"`: a column named that way."""
    with pytest.raises(ConfigError) as info:
        parse_mapping({"input": "question", field: value}, file="m.yaml")  # before any row
    (problem,) = info.value.problems
    assert problem.file == "m.yaml" and problem.field == field
    assert f"`{field}` takes a column name, not a template" in problem.message
    assert expected in problem.message


def test_mapping_naming_a_missing_parquet_column(tmp_path):
    put_parquet(str(tmp_path / "t.parquet"), [{"q": "x"}])
    text = error_text(
        DatasetSource(path=str(tmp_path / "t.parquet"), mapping={"input": "q", "target": "gold"})
    )
    assert "t.parquet" in text and "field 'mapping.target'" in text and "'gold'" in text


def test_headerless_csv_with_a_short_row(tmp_path):
    put(str(tmp_path / "m.csv"), "q1,a,b,A\nq2,a,A\n")
    text = error_text(
        DatasetSource(
            path=str(tmp_path / "m.csv"),
            mapping={
                "columns": ["question", "A", "B", "answer"],
                "input": "question",
                "choices": ["A", "B"],
                "target": "answer",
            },
        )
    )
    assert "m.csv:2" in text and "expected 4 columns" in text and "found 3" in text


def test_non_utf8_csv_names_the_line(tmp_path):
    put(str(tmp_path / "l.csv"), b"q,a\nfine,1\ncaf\xe9,2\n")
    text = error_text(
        DatasetSource(path=str(tmp_path / "l.csv"), mapping={"input": "q", "target": "a"})
    )
    assert "l.csv:3" in text and "not valid UTF-8" in text and "0xe9" in text


def test_answer_not_among_the_choices(tmp_path):
    put_jsonl(
        str(tmp_path / "c.jsonl"), [{"id": "z9", "q": "?", "ch": ["x", "y", "z"], "key": "D"}]
    )
    text = error_text(
        DatasetSource(
            path=str(tmp_path / "c.jsonl"),
            mapping={"id": "id", "input": "q", "choices": {"column": "ch"}, "target": "key"},
        )
    )
    assert "c.jsonl:1" in text and "item 'z9'" in text and "field 'mapping.target'" in text
    assert "answer 'D' is not one of the choice labels A, B, C" in text


def test_too_many_choices(tmp_path):
    put_jsonl(
        str(tmp_path / "c.jsonl"), [{"q": "?", "ch": [f"c{i}" for i in range(27)], "key": "A"}]
    )
    text = error_text(
        DatasetSource(
            path=str(tmp_path / "c.jsonl"),
            mapping={"input": "q", "choices": {"column": "ch"}, "target": "key"},
        )
    )
    assert "field 'mapping.choices'" in text and "27 choices" in text and "2 to 26" in text


def test_target_pattern_without_a_match(tmp_path):
    put_jsonl(str(tmp_path / "g.jsonl"), [{"q": "?", "a": "no final line"}])
    text = error_text(
        DatasetSource(
            path=str(tmp_path / "g.jsonl"),
            mapping={"input": "q", "target": "a", "target_pattern": "#### (.+)$"},
        )
    )
    assert "g.jsonl:1" in text and "field 'mapping.target_pattern'" in text
    assert "'no final line' does not match" in text


def test_mapped_id_that_is_not_web_safe(tmp_path):
    put_jsonl(str(tmp_path / "i.jsonl"), [{"id": "a b", "q": "?", "a": "True"}])
    text = error_text(
        DatasetSource(
            path=str(tmp_path / "i.jsonl"),
            mapping={"id": "id", "input": "q", "target": "a", "modality": "boolean"},
        )
    )
    assert "i.jsonl:1" in text and "item 'a b'" in text
    assert "identifier (from mapping.id)" in text and "not web-friendly" in text


def test_mapped_row_breaking_the_modality(tmp_path):
    put_jsonl(str(tmp_path / "b.jsonl"), [{"q": "?", "a": "maybe"}])
    text = error_text(
        DatasetSource(
            name="b",
            path=str(tmp_path / "b.jsonl"),
            mapping={"input": "q", "target": "a", "modality": "boolean"},
        )
    )
    assert "item 'b.b.0'" in text and "response (from mapping.target)" in text
    assert '"True", "False"' in text


def test_duplicate_ids_within_a_mapped_file(tmp_path):
    put_jsonl(str(tmp_path / "d.jsonl"), [{"id": "X1", "q": "a"}, {"id": "x1", "q": "b"}])
    text = error_text(
        DatasetSource(path=str(tmp_path / "d.jsonl"), mapping={"id": "id", "input": "q"})
    )
    assert "d.jsonl:2" in text and "duplicate identifier 'x1'" in text and "d.jsonl:1" in text


def test_duplicate_ids_across_two_datasets(tmp_path):
    put_items_dataset(
        str(tmp_path / "one"),
        [
            {"identifier": "Shared.1", "modality": "boolean", "prompt": "p", "response": "True"},
            {"identifier": "own.1", "modality": "boolean", "prompt": "p", "response": "True"},
        ],
    )
    put_jsonl(str(tmp_path / "two.jsonl"), [{"id": "shared.1", "q": "?"}, {"id": "b", "q": "?"}])
    handles = [
        open_source(DatasetSource(name="one", path=str(tmp_path / "one"))),
        open_source(
            DatasetSource(
                name="two", path=str(tmp_path / "two.jsonl"), mapping={"id": "id", "input": "q"}
            )
        ),
    ]
    with pytest.raises(DatasetError) as info:
        check_unique_ids(handles)
    text = str(info.value)
    assert "item 'shared.1'" in text and "dataset 'two'" in text and "dataset 'one'" in text
    assert "case-insensitively" in text and info.value.exit_code == 2


def test_study_ids_scale_to_many_items():
    ids = StudyIds()
    from itemeval.datasets import WorkItem

    batches = (
        [WorkItem(id=f"a.{i}", input="x") for i in range(j, j + 10_000)]
        for j in range(0, 200_000, 10_000)
    )
    assert sum(len(b) for b in ids.track("a", batches)) == 200_000
    with pytest.raises(DatasetError, match="1 more shared ids"):
        list(ids.track("b", [[WorkItem(id=f"A.{i}", input="x") for i in range(21)]]))


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        ({"id": "x", "id_template": "y", "input": "q"}, "`id` or `id_template`, not both"),
        ({"input": "q", "targt": "a"}, "unknown field"),
        ({"input": "q", "choices": ["A"]}, "2 to 26 choice columns"),
        ({"input": "q", "choices": [f"c{i}" for i in range(27)]}, "found 27"),
        ({"input_template": "{{ q }}", "choices": ["A", "B"]}, "{{ _choices }}"),
        ({"input": "q", "modality": "multiple-choice"}, "unknown modality"),
        ({"input": "q", "target_pattern": "(a)(b)"}, "at most one group"),
        ({"input": "q", "metadata": {"prompt": "x"}}, "is an item attribute"),
        ({"input": "q", "header": False}, "needs `columns:`"),
    ],
)
def test_invalid_mapping_files(tmp_path, mapping, expected):
    import yaml

    path = put(str(tmp_path / "m.yaml"), yaml.safe_dump(mapping))
    with pytest.raises(ConfigError) as info:
        load_mapping_file(path)
    assert expected in str(info.value) and "m.yaml" in str(info.value)


def test_invalid_mapping_yaml(tmp_path):
    path = put(str(tmp_path / "m.yaml"), "input: q\ntarget: [a\n")
    with pytest.raises(ConfigError, match=r"m\.yaml:3.*not valid YAML"):
        load_mapping_file(path)
