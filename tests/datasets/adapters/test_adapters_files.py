"""JSONL, CSV and parquet files through mappings, on local disk and on the moto S3 server."""

import datetime

import pytest
from adapter_files import put, put_jsonl, put_parquet

from itemeval.datasets.adapters import DatasetSource, open_source
from itemeval.storage import resolve


def read(source, base_dir=None):
    handle = open_source(source, base_dir)
    return handle, [item for batch in handle.iter_batches(3) for item in batch]


def test_headerless_csv_with_bom_and_lettered_choices(root_url):
    """MMLU's layout: no header, choices in columns A-D, the subject only in the file name."""
    put(
        root_url + "/mmlu/anatomy_test.csv",
        '\ufeffWhich bone?,Femur,Ulna,"Radius, distal",Tibia,C\n'
        '"A ""quoted""\nmultiline question",w,x,y,z,a\n',
    )
    put(root_url + "/mmlu/astronomy_test.csv", "Closest star?,Sun,Vega,Sirius,Rigel,A\n")
    mapping = {
        "columns": ["question", "A", "B", "C", "D", "answer"],
        "id_template": "mmlu.{{ _stem }}.{{ _index }}",
        "input_template": "{{ question }}\n\n{{ _choices }}",
        "choices": ["A", "B", "C", "D"],
        "target": "answer",
        "metadata": {"subject": "{{ _stem }}"},
    }
    handle, items = read(DatasetSource(name="mmlu", path=root_url + "/mmlu/*.csv", mapping=mapping))
    assert [i.id for i in items] == [
        "mmlu.anatomy_test.0",
        "mmlu.anatomy_test.1",
        "mmlu.astronomy_test.0",
    ]
    first, second, _ = items
    assert first.input == ("Which bone?\n\nA. Femur\nB. Ulna\nC. Radius, distal\nD. Tibia")
    assert first.target == "C" and first.modality == "choiceof4"
    assert first.metadata == {
        "subject": "anatomy_test",
        "choices": ["Femur", "Ulna", "Radius, distal", "Tibia"],
    }
    assert second.input.startswith('A "quoted"\nmultiline question')
    assert second.target == "A"  # "a" matched the label case-insensitively
    assert set(handle.fingerprint_details().files) == {"anatomy_test.csv", "astronomy_test.csv"}


def test_nested_json_choices_with_digit_labels_and_varying_counts(root_url):
    """ARC's layout: question.stem, question.choices [{label, text}], answerKey."""
    rows = [
        {
            "id": "q1",
            "question": {
                "stem": "Pick two",
                "choices": [
                    {"label": "1", "text": "one"},
                    {"label": "2", "text": "two"},
                    {"label": "3", "text": "three"},
                ],
            },
            "answerKey": "2",
        },
        {
            "id": "q2",
            "question": {
                "stem": "Pick E",
                "choices": [{"label": c, "text": c.lower()} for c in "ABCDE"],
            },
            "answerKey": "E",
        },
    ]
    put_jsonl(root_url + "/arc.jsonl", rows)
    mapping = {
        "id_template": "arc.{{ id }}",
        "input_template": "{{ question.stem }}\n{{ _choices }}",
        "choices": {"column": "question.choices"},
        "target": "answerKey",
    }
    _, items = read(DatasetSource(path=root_url + "/arc.jsonl", mapping=mapping))
    assert [(i.id, i.modality, i.target) for i in items] == [
        ("arc.q1", "choiceof3", "B"),
        ("arc.q2", "choiceof5", "E"),
    ]
    assert items[0].input == "Pick two\nA. one\nB. two\nC. three"


def test_ten_options_become_choiceof10(root_url):
    """MMLU-Pro's layout: a list of ten option strings and a 0-based answer index; and the same
    ten options as ten columns with an answer letter."""
    options = [f"option {i}" for i in range(10)]
    put_jsonl(
        root_url + "/pro.jsonl",
        [
            {"question_id": 7, "question": "Which?", "options": options, "answer_index": 9},
            {"question_id": 8, "question": "And?", "options": options[:6], "answer_index": 5},
        ],
    )
    mapping = {
        "id_template": "pro.{{ question_id }}",
        "input": "question",
        "choices": {"column": "options", "answer": "index"},
        "target": "answer_index",
    }
    _, items = read(DatasetSource(path=root_url + "/pro.jsonl", mapping=mapping))
    assert [(i.id, i.modality, i.target) for i in items] == [
        ("pro.7", "choiceof10", "J"),
        ("pro.8", "choiceof6", "F"),
    ]
    assert items[0].input.endswith("\nI. option 8\nJ. option 9")
    assert items[0].metadata["choices"] == options

    columns = list("ABCDEFGHIJ")
    put(
        root_url + "/wide.csv",
        ",".join(["q", *columns, "key"]) + "\n" + ",".join(["Which?", *options, "i"]) + "\n",
    )
    mapping = {"input": "q", "choices": columns, "target": "key"}
    _, (item,) = read(DatasetSource(path=root_url + "/wide.csv", mapping=mapping))
    assert (item.modality, item.target) == ("choiceof10", "I")


def test_target_pattern_and_support(root_url):
    """GSM8K's layout: the gold value after #### on the last line of the worked answer."""
    put_jsonl(
        root_url + "/gsm.jsonl",
        [
            {"question": "How many?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
            {"question": "How much?", "answer": "big\n#### 1,450,000"},
        ],
    )
    mapping = {
        "input": "question",
        "target": "answer",
        "target_pattern": "#### (.+)$",
        "modality": "single-value",
        "support_column": "answer",
        "task_prompt": "Answer with a number.",
    }
    _, items = read(DatasetSource(name="gsm8k", path=root_url + "/gsm.jsonl", mapping=mapping))
    assert [i.target for i in items] == ["7", "1,450,000"]
    assert items[0].id == "gsm8k.gsm.0" and items[1].id == "gsm8k.gsm.1"
    assert items[0].metadata["support"].endswith("#### 7")
    assert items[0].task_prompt == "Answer with a number."


def test_json_booleans_become_true_false(root_url):
    put_jsonl(
        root_url + "/boolq.jsonl",
        [
            {"question": "is it", "passage": "Text {with braces}.", "answer": True, "title": "T"},
            {"question": "is it not", "passage": "P", "answer": False, "title": "U"},
        ],
    )
    mapping = {
        "input_template": "{{ passage }}\nQ: {{ question }}?",
        "target": "answer",
        "modality": "boolean",
        "metadata": ["title"],
    }
    _, items = read(DatasetSource(path=root_url + "/boolq.jsonl", mapping=mapping))
    assert [i.target for i in items] == ["True", "False"]
    assert items[0].input == "Text {with braces}.\nQ: is it?"
    assert items[1].metadata == {"title": "U"}


def test_csv_header_renamed_and_grading_scheme_template(root_url):
    """TruthfulQA's layout: a header with spaces in the names, renamed with `columns:`."""
    put(
        root_url + "/tqa.csv",
        "\ufeffType,Question,Best Answer,Correct Answers\n"
        "Adversarial,Why?,Because,Because; That's why\n",
    )
    mapping = {
        "header": True,
        "columns": ["type", "question", "best", "correct"],
        "input": "question",
        "target": "best",
        "modality": "shortprose",
        "grading_scheme": "True answers: {{ correct }}",
        "metadata": {"kind": "type"},
    }
    _, items = read(DatasetSource(path=root_url + "/tqa.csv", mapping=mapping))
    (item,) = items
    assert item.modality == "short-prose" and item.target == "Because"
    assert item.grading_scheme == "True answers: Because; That's why"
    assert item.metadata == {"kind": "Adversarial"}


def test_parquet_is_streamed_by_row_group_and_works_without_modality(root_url):
    rows = [
        {
            "qid": f"p{i}",
            "text": f"question {i}",
            "gold": i,
            "level": i / 2000,
            "day": datetime.date(2025, 1, 1 + i % 28),
        }
        for i in range(2000)
    ]
    put_parquet(root_url + "/data.parquet", rows, row_group_size=300)
    mapping = {
        "id": "qid",
        "input": "text",
        "target": "gold",
        "difficulty_column": "level",
        "metadata": ["day"],
    }
    handle = open_source(DatasetSource(path=root_url + "/data.parquet", mapping=mapping))
    batches = handle.iter_batches(512)
    first = next(batches)
    assert len(first) == 512 and first[0].id == "p0" and first[0].modality is None
    assert first[10].target == "10" and first[10].difficulty == 10 / 2000
    assert first[10].metadata == {"day": "2025-01-11"}  # JSON-safe
    assert '"day": "2025-01-11"' in first[10].to_row()["metadata"]
    assert sum(len(b) for b in batches) == 2000 - 512
    report = handle.validate()
    assert report.ok and report.by_modality == {"(no modality)": 2000}


def test_fingerprint_covers_files_and_mapping(root_url):
    put_jsonl(root_url + "/f.jsonl", [{"q": "x", "a": "y"}])
    base = {"input": "q", "target": "a"}
    one = open_source(DatasetSource(path=root_url + "/f.jsonl", mapping=base))
    two = open_source(
        DatasetSource(path=root_url + "/f.jsonl", mapping={**base, "task_prompt": "Hi"})
    )
    assert one.fingerprint_details().files == two.fingerprint_details().files
    assert one.fingerprint() != two.fingerprint()
    put_jsonl(root_url + "/f.jsonl", [{"q": "x", "a": "z"}])
    resolve(root_url).invalidate()
    three = open_source(DatasetSource(path=root_url + "/f.jsonl", mapping=base))
    assert three.fingerprint() != one.fingerprint()


@pytest.mark.parametrize("directory_form", [True, False])
def test_a_directory_of_files_reads_them_all(root_url, directory_form):
    put_jsonl(root_url + "/dir/a.jsonl", [{"q": "1"}])
    put_jsonl(root_url + "/dir/b.jsonl", [{"q": "2"}])
    path = root_url + ("/dir" if directory_form else "/dir/*.jsonl")
    _, items = read(DatasetSource(name="d", path=path, mapping={"input": "q"}))
    assert [i.id for i in items] == ["d.a.0", "d.b.0"]
    assert [i.target for i in items] == ["", ""]
