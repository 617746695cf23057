"""The lean structures of a large run (issue 36) give what the plain ones gave: spliced prompts
kept as pieces (SplicedPrompt), JSONL read by column, label rows made when read and written in
chunks, stored support answers held as what their rows read (Lightener) and the cache written
while an in-process judge runs (store.FLUSH_AT). A run through them and a run through the plain
paths write the same labels, journal and cache keys, and a rerun reuses every answer."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pandas as pd
import pytest

from memjudge.errors import InputError
from memjudge.formats import readers
from memjudge.judges import Prompt
from memjudge.judges.panel import judge_config
from memjudge.judges.rubrics import Rubric, SplicedPrompt, load_rubric
from memjudge.scoring import engine, outputs, store
from memjudge.scoring.answers import Lightener
from memjudge.scoring.engine import RunOptions, score_run
from memjudge.scoring.jsonl import json_line
from memjudge.simulation import simulate


def _plain_paths(monkeypatch) -> None:
    """Every prompt rendered in full, JSONL read row by row, label rows as one list of dicts
    and each file written as one string: the structures before issue 36."""
    monkeypatch.setattr(Rubric, "_item_forms", property(lambda self: None))
    monkeypatch.setattr(readers, "_jsonl_frame", lambda path: readers._frame(*readers._jsonl_rows(path), path))
    lean_rows = outputs.LabelRows
    monkeypatch.setattr(outputs, "LabelRows", lambda plan, judge, rub: list(lean_rows(plan, judge, rub)))
    monkeypatch.setattr(outputs, "jsonl_chunks", lambda rows: ["".join(map(json_line, rows))])
    monkeypatch.setattr(engine, "Lightener", lambda keep_calls: (lambda task: None))  # every record held whole
    monkeypatch.setattr(store, "FLUSH_AT", 10**9)  # the cache written by the saver, at the end


def _lines(path: Path) -> list[dict]:
    """The file's lines, without latency_s (the one field that is a measured time)."""
    out = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        d.pop("latency_s", None)
        out.append(d)
    return out


def _keys(cache_dir: Path) -> set[str]:
    import sqlite3

    with sqlite3.connect(cache_dir / "cache.db") as db:
        return {k for (k,) in db.execute("SELECT key FROM Cache")}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    simulate(personas=4, seed=3, out=folder)
    (folder / "judges.toml").write_text(f'[[judge]]\nspec = "sim:paper"\n[judge.options]\ntruth = "{folder}"\n')
    return folder


def _score(corpus: Path, out: Path, cache: Path):
    judge = judge_config("sim:paper", corpus / "judges.toml")
    return score_run(corpus / "candidates.jsonl", corpus / "sources.jsonl", judge, replicates=2, out=out, cache_dir=cache,
                     progress=False, run=RunOptions(argv={}))


class _CountingLightener(Lightener):
    lightened = 0

    def __call__(self, task):
        _CountingLightener.lightened += task.record is not None
        super().__call__(task)


@pytest.mark.parametrize("keep_rows", [outputs._KEEP_ROWS, 0], ids=["label rows kept", "label rows made again"])
def test_lean_and_plain_paths_write_the_same_run(corpus, tmp_path, monkeypatch, keep_rows):
    monkeypatch.setattr(store, "FLUSH_AT", 7)  # many writes of the cache from the loop's thread
    monkeypatch.setattr(outputs, "_KEEP_ROWS", keep_rows)  # 0: as a run of more rows, each read makes them
    monkeypatch.setattr(engine, "Lightener", _CountingLightener)
    monkeypatch.setattr(_CountingLightener, "lightened", 0)
    lean = _score(corpus, tmp_path / "lean", tmp_path / "lean-cache")
    assert _CountingLightener.lightened == lean.summary.calls > 7
    with monkeypatch.context() as m:
        _plain_paths(m)
        plain = _score(corpus, tmp_path / "plain", tmp_path / "plain-cache")
        assert plain.labels is not None and plain.summary.requested == lean.summary.requested > 0
    for name in ("labels.jsonl", "journal.jsonl"):
        assert _lines(tmp_path / "lean" / name) == _lines(tmp_path / "plain" / name), name
    assert _keys(tmp_path / "lean-cache") == _keys(tmp_path / "plain-cache")
    pd.testing.assert_frame_equal(lean.labels.drop(columns="latency_s"), plain.labels.drop(columns="latency_s"), check_dtype=True)
    # each byte of a line but its latency: the key order and the JSON text too
    lean_text = [line.split('"latency_s"')[0] for line in (tmp_path / "lean" / "labels.jsonl").read_text().splitlines()]
    plain_text = [line.split('"latency_s"')[0] for line in (tmp_path / "plain" / "labels.jsonl").read_text().splitlines()]
    assert lean_text == plain_text

    # A rerun through the lean paths reuses every answer, from the journal or from the cache alone.
    again = _score(corpus, tmp_path / "lean", tmp_path / "lean-cache")
    assert again.summary.requested == 0 and again.summary.resumed == again.summary.calls
    fresh = _score(corpus, tmp_path / "fresh", tmp_path / "plain-cache")
    assert fresh.summary.requested == 0 and fresh.summary.cached == fresh.summary.calls
    assert _lines(tmp_path / "lean" / "labels.jsonl") == [{**d, "cached": True} for d in _lines(tmp_path / "plain" / "labels.jsonl")]
    assert _lines(tmp_path / "fresh" / "labels.jsonl") == [{**d, "cached": True} for d in _lines(tmp_path / "plain" / "labels.jsonl")]


def test_a_spliced_prompt_is_its_plain_prompt():
    rub = load_rubric("support")
    source = "Post 1: I run every morning. Post 2: my sister Ana is a nurse."
    spliced = rub.support_renderer(source=source, persona_id="p1")("The user runs.", "hobby", "a1")
    plain = rub.render_support(source=source, assertion="The user runs.", category="hobby", persona_id="p1", assertion_id="a1")
    assert isinstance(spliced, SplicedPrompt) and type(plain) is Prompt
    assert spliced == plain and plain == spliced and hash(spliced) == hash(plain) and repr(spliced) == repr(plain)
    assert (spliced.system, spliced.user) == (plain.system, plain.user)
    assert spliced != Prompt(plain.system, plain.user + " ")
    copied = pickle.loads(pickle.dumps(spliced))
    assert type(copied) is Prompt and copied == plain


def test_jsonl_by_column_is_the_row_reading(tmp_path):
    """Keys in the order first seen, rows lacking one as None, nested values, equal dicts of
    different value types kept apart, blank lines and CRLF skipped as before."""
    rows = [{"a": "x", "u": {"n": 1}}, {"u": {"n": True}, "b": [1, 2]}, {"a": "x", "u": {"n": 1.0}, "c": {"d": {"e": None}}},
            {"a": "y\u2028z", "u": {"n": 1}}, {}]
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows[:2]) + "\r\n\n  \n" + \
        "\n".join(json.dumps(r, ensure_ascii=False) for r in rows[2:]) + "\n"
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    readers._CHUNK_LINES, chunk = 2, readers._CHUNK_LINES
    try:
        got = readers._jsonl_frame(path)
    finally:
        readers._CHUNK_LINES = chunk
    want = readers._frame(*readers._jsonl_rows(path), path)
    pd.testing.assert_frame_equal(got, want)
    for c in got.columns:
        assert [type(v) for v in got[c]] == [type(v) for v in want[c]], c
        if c == "u":
            assert [type(v["n"]) for v in got[c] if v is not None] == [int, bool, float, int]
    assert list(got.columns) == ["a", "u", "b", "c", readers.LINE] and got[readers.LINE].tolist() == [1, 2, 5, 6, 7]

    for bad, message, line in [('{"a": 1}\n{"a": \n', "not valid JSON", 2), ('{"a": 1}\n[1]\n', "expected a JSON object", 2),
                               ('{"a": 1}, {"b": 2}\n{"c": 3}\n', "not valid JSON", 1), ("\n \n", "file is empty", None)]:
        path.write_text(bad)
        with pytest.raises(InputError, match=message) as e:
            readers.read_table(path)
        assert e.value.line == line, bad


class _Text(str):
    pass


@pytest.mark.parametrize("options", [{}, {"allow_nan": False}, {"sort_keys": True, "separators": (",", ":")},
                                     {"sort_keys": True, "separators": (",", ":"), "allow_nan": False}])
def test_the_encoder_made_once_writes_what_json_dumps_writes(options, corpus, tmp_path):
    """jsontext.encoder (journal lines, label rows, cache values and keys) gives json.dumps'
    text, or raises its error, for every kind of value, one after another (no state is kept
    from a value that failed)."""
    from memjudge._util import jsontext

    run = tmp_path / "run"
    _score(corpus, run, tmp_path / "cache")
    journal = (run / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    rows = (run / "labels.jsonl").read_text(encoding="utf-8").splitlines()
    values = [json.loads(journal[0]), json.loads(rows[0]), json.loads(rows[-1]),
              'a "quoted" é \u2028 \\ \x00 text', _Text("a str subclass"), 1, -0.0, 1.5e300, 2**70, True, None, [], {},
              {"b": 1, "a": [1, {"é": "x", "z": None}]}, {1: "int", 2.5: "float", False: "bool", None: "none"},
              [float("inf")], {"x": float("nan")}, object(), {"k": {1, 2}}, {(1, 2): 1}, {"a": 1, 2: "mixed keys"},
              [[[[{"deep": [1.0, -2, "x"]}]]]]]
    encode = jsontext.encoder(**options)
    for value in values + values[::-1]:
        try:
            want = json.dumps(value, ensure_ascii=False, **options)
        except (TypeError, ValueError) as e:
            with pytest.raises(type(e)):
                encode(value)
            continue
        assert encode(value) == want
