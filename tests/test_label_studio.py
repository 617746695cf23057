"""Label Studio both ways: `memjudge annotate ITEMS --export label-studio --out TASKS.json`
(tasks + labelling config) and `memjudge import label-studio EXPORT.json --out GOLD.jsonl`.

tests/data/label_studio/export.json follows Label Studio's documented JSON export (see
tests/data/README.md for where the layout comes from and what the file covers).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from conftest import TEST_DATA
from memjudge.cli import main
from memjudge.formats import read_gold

EXPORT = TEST_DATA / "label_studio" / "export.json"


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_import_the_documented_export(tmp_path, capsys):
    gold = tmp_path / "gold.jsonl"
    assert main(["import", "label-studio", str(EXPORT), "--out", str(gold), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {k: summary[k] for k in ("tasks", "annotations", "cancelled", "without_verdict", "superseded", "gold_rows")} == {
        "tasks": 4, "annotations": 7, "cancelled": 1, "without_verdict": 1, "superseded": 1, "gold_rows": 4}
    assert summary["annotators"] == ["bob@example.org", "ls-user-10", "ls-user-12"]
    rows = [json.loads(x) for x in gold.read_text(encoding="utf-8").splitlines()]
    assert [(r["assertion_id"], r["annotator"], r["verdict"], r["note"]) for r in rows] == [
        ("a1", "bob@example.org", "supported", "quotes it almost verbatim"),
        ("a1", "ls-user-10", "supported", None),        # annotation 2003 updated after 2001
        ("a2", "bob@example.org", "partial", None),     # user 10 cancelled (skipped) this task
        ("a4", "ls-user-12", "unsupported", "injection attempt, not a fact\nsecond line"),
    ]
    assert rows[1]["labelled_at"] == "2026-11-03T16:40:05.000000Z"
    g = read_gold(gold)  # the gold reader accepts it: several annotators, latest per (assertion, annotator)
    assert len(g) == 4 and set(g["annotator"]) == {"bob@example.org", "ls-user-10", "ls-user-12"}
    # the text form
    assert main(["import", "label-studio", str(EXPORT), "--out", str(gold)]) == 0
    out = capsys.readouterr().out
    assert "label-studio: 4 gold labels by 3 annotator(s)" in out and "1 cancelled/skipped" in out


def test_export_tasks_and_config_then_round_trip(tmp_path, capsys):
    items = _jsonl(tmp_path / "to_label.jsonl", [
        {"assertion_id": "x1", "persona_id": "p1", "category": "values", "text": "The user values honesty", "inclusion_prob": 0.25},
        {"assertion_id": "x2", "persona_id": "p1", "category": "facts", "text": "<b>two</b> cats", "inclusion_prob": 0.5},
        {"assertion_id": "x3", "persona_id": "p2", "category": "facts", "text": "speaks French", "inclusion_prob": 0.5},
    ])
    sources = _jsonl(tmp_path / "sources.jsonl", [{"persona_id": "p1", "source": "honesty; two cats"},
                                                  {"persona_id": "p2", "source": "bonjour"}])
    tasks_path = tmp_path / "tasks.json"
    assert main(["annotate", str(items), "--sources", str(sources), "--export", "label-studio", "--out", str(tasks_path)]) == 0
    assert "wrote 3 Label Studio tasks" in capsys.readouterr().out
    tasks = json.loads(tasks_path.read_text(encoding="utf-8"))
    assert tasks[1]["data"] == {"assertion_id": "x2", "persona_id": "p1", "category": "facts", "text": "<b>two</b> cats",
                                "source": "honesty; two cats", "inclusion_prob": 0.5}
    assert [t["data"]["assertion_id"] for t in tasks] == ["x1", "x2", "x3"]

    # the labelling config: a single-choice `verdict` over the three verdicts, fed by the task's fields
    root = ET.fromstring((tmp_path / "tasks.label_config.xml").read_text(encoding="utf-8"))
    choices = root.find(".//Choices[@name='verdict']")
    assert choices is not None and choices.get("choice") == "single"
    assert [c.get("value") for c in choices.findall("Choice")] == ["supported", "unsupported", "partial"]
    texts = {t.get("name"): t.get("value") for t in root.iter("Text")}
    assert choices.get("toName") in texts
    assert {v.lstrip("$") for v in texts.values()} <= set(tasks[0]["data"])
    assert root.find(".//TextArea[@name='note']") is not None

    # Label Studio adds ids and annotations; its export comes back as gold rows
    verdicts = {"x1": "supported", "x2": "partial", "x3": "unsupported"}
    export = [dict(t, id=500 + i, annotations=[{
        "id": 900 + i, "completed_by": {"id": 3, "email": "ann@example.org"}, "was_cancelled": False,
        "created_at": "2026-11-05T10:00:00Z", "updated_at": "2026-11-05T10:00:00Z", "task": 500 + i,
        "result": [{"from_name": "verdict", "to_name": choices.get("toName"), "type": "choices", "id": f"r{i}",
                    "value": {"choices": [verdicts[t["data"]["assertion_id"]]]}}]}], predictions=[])
        for i, t in enumerate(tasks)]
    (tmp_path / "export.json").write_text(json.dumps(export), encoding="utf-8")
    gold = tmp_path / "gold.jsonl"
    assert main(["import", "label-studio", str(tmp_path / "export.json"), "--out", str(gold)]) == 0
    g = read_gold(gold)
    assert dict(zip(g["assertion_id"], g["verdict"])) == verdicts
    assert set(g["annotator"]) == {"ann@example.org"}


@pytest.mark.parametrize("content, message", [
    ('{"data": {}}', "expected Label Studio's JSON export (a list of tasks), found a JSON dict"),
    ('[{"id": 1, "data": {"assertion_id": "a"},\n "annotations": [}]', "export.json:2: not valid JSON"),
    ('[{"id": 7, "data": {"text": "t"}, "annotations": []}]', "task 1 (id 7): no data.assertion_id"),
    ('[{"data": {"assertion_id": "a"}, "annotations": [{"completed_by": 1, "result": '
     '[{"from_name": "verdict", "type": "choices", "value": {"choices": ["maybe"]}}]}]}]',
     "task 1: verdict ['maybe'] is not one of supported, unsupported, partial"),
    ('[{"data": {"assertion_id": "a"}, "annotations": [{"completed_by": 1, "was_cancelled": true, "result": []}]}]',
     "no annotation with a verdict (1 annotations, 1 cancelled, 0 without a verdict)"),
    ('[{"assertion_id": "a", "verdict": "supported"}]', "task 1: expected an object with 'data'"),
])
def test_bad_exports_are_one_line_errors(tmp_path, capsys, content, message):
    path = tmp_path / "export.json"
    path.write_text(content, encoding="utf-8")
    gold = tmp_path / "gold.jsonl"
    assert main(["import", "label-studio", str(path), "--out", str(gold)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith(str(path))
    assert not gold.exists()


def test_config_and_fixture_against_label_studio_sdk():
    """Label Studio's own SDK (label-studio-sdk, not a memjudge dependency: ~500 MB with its
    dependencies) parses the config and validates the fixture's annotations against it. Checked
    with label-studio-sdk 2.1.2; skipped where the SDK is not installed."""
    li_mod = pytest.importorskip("label_studio_sdk.label_interface", reason="label-studio-sdk not installed (optional reference check)")
    from memjudge.annotate.label_studio import LABEL_CONFIG

    li = li_mod.LabelInterface(LABEL_CONFIG)
    assert [(c.name, c.tag, list(c.labels)) for c in li.controls][0] == ("verdict", "Choices", ["supported", "unsupported", "partial"])
    export = json.loads(EXPORT.read_text(encoding="utf-8"))
    for task in export:
        assert li.validate_task({"data": task["data"]})
        for ann in task["annotations"]:
            assert li.validate_annotation(ann), ann["id"]
    bad = {"result": [{"from_name": "verdict", "to_name": "text", "type": "choices", "value": {"choices": ["maybe"]}}]}
    assert not li.validate_annotation(bad)
