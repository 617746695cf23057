"""Readers' bad-input matrix (issue 2, item 2), seen through `memjudge score --dry-run`:
every problem is exactly one stderr line `PATH:LINE: what is wrong` (or `PATH: ...` when no
line applies), exit status 2 and no traceback; the accepted oddities (BOM, CRLF, blank
trailing lines, extra columns) load, and extra columns reach labels.jsonl."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memjudge import cli as memjudge_cli
from memjudge.scoring.engine import RunOptions, score_run
from scripted_judge import ScriptedJudge, candidates_frame, sources_frame

SOURCES = '{"persona_id": "p1", "source": "I live in Zurich and I value honesty."}\n{"persona_id": "p2", "source": "I am a nurse."}\n'
GOOD = [
    {"persona_id": "p1", "assertion_id": "a1", "category": "location", "confidence": 0.9, "text": "Lives in Zurich"},
    {"persona_id": "p1", "assertion_id": "a2", "category": "values", "confidence": 0.4, "text": "Values honesty"},
    {"persona_id": "p2", "assertion_id": "a3", "category": "job", "confidence": 0.7, "text": "Is a nurse"},
]
# No request is made in a dry run; the base URL only spares the judge an API key.
JUDGE = ["--judge", "openai:gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1"]


def run_inproc(capsys, *args):
    """The CLI entry point in this process (fast enough for a large matrix)."""
    code = memjudge_cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code, err, path: Path, line: int | None, *fragments: str):
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    prefix = f"{path}:{line}: " if line is not None else f"{path}: "
    assert lines[0].startswith(prefix), (lines[0], prefix)
    for frag in fragments:
        assert frag.lower() in lines[0].lower(), (frag, lines[0])


@pytest.fixture
def sources(tmp_path) -> Path:
    p = tmp_path / "sources.jsonl"
    p.write_text(SOURCES, encoding="utf-8")
    return p


def jsonl(rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


# ---------------------------------------------------------------------------------------
# JSONL candidates: (content, expected line or None, fragment of the message)

JSONL_CASES = {
    "empty file": ("", None, "empty"),
    "only blank lines": ("\n  \n\n", None, "empty"),
    "not json": (jsonl([GOOD[0], "{not json"]), 2, "not valid JSON"),
    "json array line": (jsonl([GOOD[0], "[1, 2]"]), 2, "expected a JSON object"),
    "json string line": (jsonl([GOOD[0], '"text"']), 2, "expected a JSON object"),
    "missing text key": (jsonl([GOOD[0], {k: v for k, v in GOOD[1].items() if k != "text"}]), 2, "missing 'text'"),
    "missing column everywhere": (jsonl([{k: v for k, v in r.items() if k != "category"} for r in GOOD]), None, "missing required column"),
    "null assertion id": (jsonl([GOOD[0], {**GOOD[1], "assertion_id": None}]), 2, "assertion_id"),
    "empty persona id": (jsonl([{**GOOD[0], "persona_id": ""}]), 1, "persona_id"),
    "empty text": (jsonl([GOOD[0], {**GOOD[1], "text": ""}]), 2, "empty 'text'"),
    "whitespace text": (jsonl([GOOD[0], GOOD[1], {**GOOD[2], "text": " \t "}]), 3, "empty 'text'"),
    "numeric text": (jsonl([{**GOOD[0], "text": 42}]), 1, "must be a string"),
    "object text": (jsonl([GOOD[0], {**GOOD[1], "text": {"a": 1}}]), 2, "must be a string"),
    "float assertion id": (jsonl([{**GOOD[0], "assertion_id": 1.5}]), 1, "must be a string"),
    "confidence above 1": (jsonl([GOOD[0], {**GOOD[1], "confidence": 1.5}]), 2, "[0, 1]"),
    "confidence below 0": (jsonl([{**GOOD[0], "confidence": -0.1}]), 1, "[0, 1]"),
    "confidence NaN": (jsonl([GOOD[0], json.dumps(GOOD[1]).replace("0.4", "NaN")]), 2, "finite"),
    "confidence Infinity": (jsonl([json.dumps(GOOD[0]).replace("0.9", "Infinity")]), 1, "finite"),
    "confidence bool": (jsonl([GOOD[0], {**GOOD[1], "confidence": True}]), 2, "must be a number"),
    "confidence text": (jsonl([GOOD[0], GOOD[1], {**GOOD[2], "confidence": "high"}]), 3, "must be a number"),
    "duplicate assertion id": (jsonl([GOOD[0], GOOD[1], {**GOOD[2], "assertion_id": "a1"}]), 3, "duplicate assertion_id"),
    "persona without source": (jsonl([GOOD[0], {**GOOD[1], "persona_id": "p9"}]), 2, "has no source"),
}


@pytest.mark.parametrize("case", sorted(JSONL_CASES))
def test_jsonl_candidates_bad_input(case, tmp_path, sources, capsys):
    content, line, fragment = JSONL_CASES[case]
    path = tmp_path / "candidates.jsonl"
    path.write_text(content, encoding="utf-8")
    code, out, err = run_inproc(capsys, "score", path, "--sources", sources, *JUDGE, "--dry-run")
    assert_one_line_error(code, err, path, line, fragment)


def test_undecodable_bytes_name_the_line(tmp_path, sources, capsys):
    for ext, head in ((".jsonl", jsonl(GOOD[:2]).encode()), (".csv", b"persona_id,assertion_id,category,text\np1,a1,c,ok\n")):
        path = tmp_path / f"candidates{ext}"
        path.write_bytes(head + b'{"persona_id": "p1", "text": "caf\xe9"}\n')
        code, out, err = run_inproc(capsys, "score", path, "--sources", sources, *JUDGE, "--dry-run")
        assert_one_line_error(code, err, path, 3, "UTF-8")


# ---------------------------------------------------------------------------------------
# CSV

CSV_HEADER = "persona_id,assertion_id,category,confidence,text\n"
CSV_CASES = {
    "header only": (CSV_HEADER, None, "no rows"),
    "too many fields": (CSV_HEADER + "p1,a1,loc,0.5,Lives in Zurich\np1,a2,val,0.4,Values honesty,extra\n", 3, "expected 5 fields, found 6"),
    "too few fields": (CSV_HEADER + "p1,a1,loc,0.5\n", 2, "expected 5 fields, found 4"),
    "confidence nan": (CSV_HEADER + "p1,a1,loc,nan,Lives in Zurich\n", 2, "finite"),
    "confidence inf": (CSV_HEADER + "p1,a1,loc,0.2,x\np1,a2,loc,inf,y\n", 3, "finite"),
    "confidence out of range": (CSV_HEADER + "p1,a1,loc,2,Lives in Zurich\n", 2, "[0, 1]"),
    "confidence not numeric": (CSV_HEADER + "p1,a1,loc,true,Lives in Zurich\n", 2, "must be a number"),
    "empty text field": (CSV_HEADER + "p1,a1,loc,0.5,\n", 2, "missing 'text'"),
    "whitespace text": (CSV_HEADER + 'p1,a1,loc,0.5,"   "\n', 2, "empty 'text'"),
    "duplicate id": (CSV_HEADER + "p1,a1,loc,0.5,x\np1,a1,loc,0.5,y\n", 3, "duplicate assertion_id"),
    "missing column": ("persona_id,assertion_id,confidence,text\np1,a1,0.5,x\n", None, "missing required column"),
    "duplicate header": ("persona_id,assertion_id,category,text,text\np1,a1,c,x,y\n", 1, "duplicate column"),
}


@pytest.mark.parametrize("case", sorted(CSV_CASES))
def test_csv_candidates_bad_input(case, tmp_path, sources, capsys):
    content, line, fragment = CSV_CASES[case]
    path = tmp_path / "candidates.csv"
    path.write_text(content, encoding="utf-8")
    code, out, err = run_inproc(capsys, "score", path, "--sources", sources, *JUDGE, "--dry-run")
    assert_one_line_error(code, err, path, line, fragment)


# ---------------------------------------------------------------------------------------
# Parquet (a "line" is the 1-based row)


def write_parquet(path: Path, columns: dict) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def parquet_columns(**overrides):
    cols = {k: [r[k] for r in GOOD] for k in GOOD[0]}
    cols.update(overrides)
    return cols


PARQUET_CASES = {
    "confidence NaN": (dict(confidence=pa.array([0.9, float("nan"), 0.7])), 2, "finite"),
    "confidence inf": (dict(confidence=pa.array([0.9, 0.2, float("inf")])), 3, "finite"),
    "confidence out of range": (dict(confidence=[0.9, 1.2, 0.7]), 2, "[0, 1]"),
    "confidence bool": (dict(confidence=[True, False, True]), 1, "must be a number"),
    "null text": (dict(text=pa.array(["a", None, "c"], pa.string())), 2, "missing 'text'"),
    "numeric text": (dict(text=[1, 2, 3]), 1, "must be a string"),
    "empty text": (dict(text=["a", "b", ""]), 3, "empty 'text'"),
    "duplicate id": (dict(assertion_id=["a1", "a2", "a1"]), 3, "duplicate assertion_id"),
    "persona without source": (dict(persona_id=["p1", "p1", "p7"]), 3, "has no source"),
}


@pytest.mark.parametrize("case", sorted(PARQUET_CASES))
def test_parquet_candidates_bad_input(case, tmp_path, sources, capsys):
    overrides, line, fragment = PARQUET_CASES[case]
    path = write_parquet(tmp_path / "candidates.parquet", parquet_columns(**overrides))
    code, out, err = run_inproc(capsys, "score", path, "--sources", sources, *JUDGE, "--dry-run")
    assert_one_line_error(code, err, path, line, fragment)


def test_parquet_missing_column_empty_and_corrupt(tmp_path, sources, capsys):
    cols = parquet_columns()
    del cols["text"]
    path = write_parquet(tmp_path / "nocol.parquet", cols)
    code, _, err = run_inproc(capsys, "score", path, "--sources", sources, *JUDGE, "--dry-run")
    assert_one_line_error(code, err, path, None, "missing required column")

    path = write_parquet(tmp_path / "empty.parquet", {k: pa.array([], pa.string()) for k in ("persona_id", "assertion_id", "category", "text")})
    code, _, err = run_inproc(capsys, "score", path, "--sources", sources, *JUDGE, "--dry-run")
    assert_one_line_error(code, err, path, None, "empty")

    path = tmp_path / "corrupt.parquet"
    path.write_bytes(b"PAR1 this is not really parquet\n\nat all PAR1")
    code, _, err = run_inproc(capsys, "score", path, "--sources", sources, *JUDGE, "--dry-run")
    assert_one_line_error(code, err, path, None, "not a readable Parquet file")


# ---------------------------------------------------------------------------------------
# files, sources, facts


def test_missing_file_directory_and_unknown_extension(tmp_path, sources, capsys):
    good = tmp_path / "c.jsonl"
    good.write_text(jsonl(GOOD))
    cases = [
        (tmp_path / "nope.jsonl", "no such file"),
        (tmp_path, "is a directory"),
        (tmp_path / "cands.txt", "unknown extension"),
        (tmp_path / "cands", "unknown extension"),
    ]
    (tmp_path / "cands.txt").write_text(jsonl(GOOD))
    (tmp_path / "cands").write_text(jsonl(GOOD))
    for path, fragment in cases:
        code, _, err = run_inproc(capsys, "score", path, "--sources", sources, *JUDGE, "--dry-run")
        assert_one_line_error(code, err, path, None, fragment)
    # the same checks hold for the sources and facts files
    code, _, err = run_inproc(capsys, "score", good, "--sources", tmp_path / "missing.csv", *JUDGE, "--dry-run")
    assert_one_line_error(code, err, tmp_path / "missing.csv", None, "no such file")
    code, _, err = run_inproc(capsys, "score", good, "--sources", sources, *JUDGE, "--rubric", "coverage", "--facts", tmp_path, "--dry-run")
    assert_one_line_error(code, err, tmp_path, None, "is a directory")


def test_bad_sources(tmp_path, capsys):
    cands = tmp_path / "c.jsonl"
    cands.write_text(jsonl(GOOD))
    cases = {
        "conflicting duplicate": (SOURCES + '{"persona_id": "p1", "source": "something else"}\n', 3, "conflicting duplicate source"),
        "empty source": (SOURCES + '{"persona_id": "p3", "source": "  "}\n', 3, "empty 'source'"),
        "missing source column": ('{"persona_id": "p1", "text": "x"}\n', None, "missing required column"),
        "non-string source": ('{"persona_id": "p1", "source": ["a"]}\n', 1, "must be a string"),
    }
    for content, line, fragment in cases.values():
        path = tmp_path / "s.jsonl"
        path.write_text(content)
        code, _, err = run_inproc(capsys, "score", cands, "--sources", path, *JUDGE, "--dry-run")
        assert_one_line_error(code, err, path, line, fragment)
    # an identical repeat is accepted
    path = tmp_path / "s.jsonl"
    path.write_text(SOURCES + SOURCES)
    code, out, err = run_inproc(capsys, "score", cands, "--sources", path, *JUDGE, "--dry-run")
    assert code == 0, err


def test_bad_facts(tmp_path, sources, capsys):
    cands = tmp_path / "c.jsonl"
    cands.write_text(jsonl(GOOD))
    cases = {
        "duplicate fact": ('{"persona_id": "p1", "fact_id": "f1", "text": "a"}\n{"persona_id": "p1", "fact_id": "f1", "text": "b"}\n', 2, "duplicate fact"),
        "empty text": ('{"persona_id": "p1", "fact_id": "f1", "text": ""}\n', 1, "empty 'text'"),
        "missing fact_id": ('{"persona_id": "p1", "text": "a"}\n', None, "missing required column"),
    }
    for content, line, fragment in cases.values():
        path = tmp_path / "f.jsonl"
        path.write_text(content)
        code, _, err = run_inproc(capsys, "score", cands, "--sources", sources, *JUDGE, "--rubric", "coverage", "--facts", path, "--dry-run")
        assert_one_line_error(code, err, path, line, fragment)


def test_bad_input_through_a_real_process(cli, tmp_path):
    """The same one-line contract when memjudge runs as its own process."""
    path = tmp_path / "c.jsonl"
    path.write_text(jsonl([GOOD[0], {**GOOD[1], "confidence": float("nan")}]).replace("NaN", "NaN"))
    src = tmp_path / "s.jsonl"
    src.write_text(SOURCES)
    r = cli("score", path, "--sources", src, *JUDGE, "--dry-run")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"{path}:2: 'confidence' must be finite, found nan"]
    assert r.stdout == ""


# ---------------------------------------------------------------------------------------
# accepted oddities


def oddities(tmp_path: Path, fmt: str) -> Path:
    """BOM, CRLF, blank trailing lines, and extra columns (a string and a number)."""
    rows = [{**r, "source_span": f"span-{i}", "extractor_run": i} for i, r in enumerate(GOOD)]
    if fmt == "jsonl":
        path = tmp_path / "odd.jsonl"
        text = "\r\n".join(json.dumps(r) for r in rows) + "\r\n\r\n  \r\n"
        path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    elif fmt == "csv":
        path = tmp_path / "odd.csv"
        cols = list(rows[0])
        lines = [",".join(cols)] + [",".join(str(r[c]) for c in cols) for r in rows]
        path.write_bytes(b"\xef\xbb\xbf" + ("\r\n".join(lines) + "\r\n\r\n\r\n").encode())
    else:
        path = tmp_path / "odd.parquet"
        pd.DataFrame(rows).to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_accepted_oddities_load(fmt, tmp_path, sources, capsys):
    path = oddities(tmp_path, fmt)
    code, out, err = run_inproc(capsys, "score", path, "--sources", sources, *JUDGE, "--dry-run", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["calls"] == 3 and summary["dry_run"] is True and summary["requested"] == 0


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_extra_columns_reach_labels(fmt, tmp_path, sources, cli, fake_server):
    path = oddities(tmp_path, fmt)
    out = tmp_path / "run"
    r = cli("score", path, "--sources", sources, "--judge", "openai:gpt-4o-mini", "--base-url", fake_server.openai_base_url,
            "--out", out, "--no-progress", "--cache-dir", tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    labels = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
    assert [x["assertion_id"] for x in labels] == ["a1", "a2", "a3"]
    # CSV has no types: its extra columns arrive as strings, as written
    assert [x["source_span"] for x in labels] == ["span-0", "span-1", "span-2"]
    expected_runs = ["0", "1", "2"] if fmt == "csv" else [0, 1, 2]
    assert [x["extractor_run"] for x in labels] == expected_runs
    assert all(x["verdict"] in ("supported", "unsupported") for x in labels)
    assert re.fullmatch(r"support@[0-9a-f]{12}", labels[0]["rubric"])


def test_extra_columns_of_any_type_are_written(tmp_path):
    """Parquet timestamps and JSON columns mixing types reach labels.jsonl as they are and
    labels.parquet as text, instead of failing once the judging is done."""
    cands = candidates_frame(6)
    cands["when"] = pd.Timestamp("2024-01-02")
    pq_path = tmp_path / "c.parquet"
    cands.to_parquet(pq_path, index=False)
    score_run(pq_path, sources_frame(6), ScriptedJudge(), out=tmp_path / "a", cache_dir=tmp_path / "c",
              progress=False, run=RunOptions(parquet=True))
    assert {json.loads(x)["when"] for x in (tmp_path / "a" / "labels.jsonl").read_text().splitlines()} == {"2024-01-02T00:00:00"}
    assert len(pd.read_parquet(tmp_path / "a" / "labels.parquet")) == 6

    mixed = [1, "x", {"a": 1}, None, 2.5, True]
    rows = [{**r, "meta": m} for r, m in zip(candidates_frame(6).to_dict("records"), mixed)]
    path = tmp_path / "mixed.jsonl"
    path.write_text(jsonl(rows))
    score_run(path, sources_frame(6), ScriptedJudge(), out=tmp_path / "b", cache_dir=tmp_path / "c", progress=False,
              run=RunOptions(parquet=True))
    assert [json.loads(x)["meta"] for x in (tmp_path / "b" / "labels.jsonl").read_text().splitlines()] == mixed
    # pandas 3 reads a null string as NaN, pandas 2 as None: both mean missing.
    meta = pd.read_parquet(tmp_path / "b" / "labels.parquet")["meta"]
    assert [None if pd.isna(v) else v for v in meta] == ["1", "x", '{"a": 1}', None, "2.5", "true"]


# ---------------------------------------------------------------------------------------
# JSONL lines end at "\n" only (issue 12, item 3)

# Legal raw inside a JSON string, and line breaks to str.splitlines().
SEPARATORS = "\u2028\u2029\u0085"


def _answer_with_separators(server, req):
    """The fake judge's answer with the separators (raw, not escaped) in its rationale."""
    from fake_server import default_answer

    obj = json.loads(default_answer(server, req))
    if "rationale" in obj:
        obj["rationale"] = f"first{SEPARATORS}second"
    for fact in obj.get("facts", []):
        fact["fact"] = f"{fact['fact']}{SEPARATORS}"
    return json.dumps(obj, ensure_ascii=False)


def test_every_jsonl_file_memjudge_writes_reads_back_with_unicode_line_separators(tmp_path, capsys, fake_server, monkeypatch):
    from memjudge.formats import read_candidates, read_coverage, read_labels

    rows = [{**r, "text": f"{r['text']}{SEPARATORS}(x)", "note": f"n{SEPARATORS}{i}"} for i, r in enumerate(GOOD)]
    cand = tmp_path / "candidates.jsonl"
    cand.write_text("".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows), encoding="utf-8")  # CRLF too
    src = tmp_path / "sources.jsonl"
    src.write_text(SOURCES.replace("honesty.", f"honesty.{SEPARATORS}Really."), encoding="utf-8")
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps({"persona_id": "p1", "fact_id": "f1", "text": f"lives{SEPARATORS}in Zurich"}, ensure_ascii=False) + "\n")
    assert [r["text"] for r in read_candidates(cand).to_dict("records")] == [r["text"] for r in rows]
    fake_server.answer_fn = _answer_with_separators

    def score(*extra, spec="openai:gpt-4o-mini", out="run", cache="cache"):
        base = fake_server.openai_base_url if spec.startswith("openai") else fake_server.url
        return run_inproc(capsys, "score", cand, "--sources", src, "--judge", spec, "--base-url", base, "--out", tmp_path / out,
                          "--cache-dir", tmp_path / cache, "--no-progress", "--json", *extra)

    code, out, err = score("--replicates", "2")
    assert code == 0, err
    labels_path = tmp_path / "run" / "labels.jsonl"
    assert "\u2028" in labels_path.read_text(encoding="utf-8")  # written raw, as JSON allows
    labels = read_labels(labels_path)
    assert len(labels) == 6 and set(labels["rationale"]) == {f"first{SEPARATORS}second"}
    assert labels.sort_values(["assertion_id", "replicate"])["note"].tolist()[::2] == [r["note"] for r in rows]
    code, out, err = run_inproc(capsys, "noise", labels_path, "--bootstrap", "20", "--json")
    assert code == 0, err
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({"assertion_id": r["assertion_id"], "verdict": "supported", "note": SEPARATORS}, ensure_ascii=False) + "\n"
                            for r in rows), encoding="utf-8")
    code, out, err = run_inproc(capsys, "agreement", labels_path, "--gold", gold, "--bootstrap", "20", "--json")
    assert code == 0, err
    # the journal: the same folder with an empty cache resumes everything from it
    fake_server.reset()
    code, out, err = score("--replicates", "2", cache="empty-cache")
    assert code == 0, err
    assert json.loads(out)["resumed"] == 6 and fake_server.count() == 0
    # coverage.jsonl
    code, out, err = score("--rubric", "coverage", "--facts", facts, out="cov")
    assert code == 0, err
    cov = read_coverage(tmp_path / "cov" / "coverage.jsonl")
    assert cov["fact_text"].tolist() == [f"lives{SEPARATORS}in Zurich"]
    # batch result files (the provider's output lines carry the separators raw)
    monkeypatch.setenv("MEMJUDGE_BATCH_POLL_S", "0.002")
    monkeypatch.setenv("MEMJUDGE_BATCH_POLL_MAX_S", "0.02")
    code, out, err = score("--batch", out="batch", cache="batch-cache")
    assert code == 0, err
    batch_labels = read_labels(tmp_path / "batch" / "labels.jsonl")
    assert batch_labels["verdict"].notna().all() and set(batch_labels["rationale"]) == {f"first{SEPARATORS}second"}


# ---------------------------------------------------------------------------------------
# one line and exit 2, never a traceback (issue 12, item 9)


def test_a_record_nested_thousands_deep_is_one_line(tmp_path, sources, capsys):
    deep = '{"persona_id": "p1", "assertion_id": "a9", "category": "c", "text": "t", "extra": ' + "[" * 5000 + "]" * 5000 + "}"
    path = tmp_path / "deep.jsonl"
    path.write_text(jsonl([GOOD[0], deep]))
    code, out, err = run_inproc(capsys, "score", path, "--sources", sources, *JUDGE, "--dry-run")
    assert_one_line_error(code, err, path, 2, "nested too deeply")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(jsonl([{"assertion_id": "a1", "persona_id": "p1", "category": "c", "judge": "j", "rubric": "r",
                              "replicate": 0, "verdict": "supported"}, deep]))
    code, out, err = run_inproc(capsys, "noise", labels)
    assert_one_line_error(code, err, labels, 2, "nested too deeply")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "noise.json").write_text("[" * 5000 + "]" * 5000)
    code, out, err = run_inproc(capsys, "report", run_dir)
    assert code == 2 and len(err.splitlines()) == 1 and "nested too deeply" in err and "Traceback" not in err, err


def test_out_naming_a_file_or_a_path_under_a_file_is_one_line(tmp_path, sources, capsys):
    cand = tmp_path / "c.jsonl"
    cand.write_text(jsonl(GOOD))
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out in (afile, afile / "sub", afile / "sub" / "deeper"):
        code, _, err = run_inproc(capsys, "score", cand, "--sources", sources, *JUDGE, "--out", out)
        assert code == 2 and len(err.splitlines()) == 1 and "not a directory" in err and "Traceback" not in err, err
        assert str(afile) in err
    labels = tmp_path / "labels.jsonl"
    labels.write_text(jsonl([{"assertion_id": "a1", "persona_id": "p1", "category": "c", "judge": "j", "rubric": "r",
                              "replicate": r, "verdict": "supported"} for r in (0, 1)]))
    code, _, err = run_inproc(capsys, "noise", labels, "--bootstrap", "10", "--out", afile / "sub")
    assert code == 2 and len(err.splitlines()) == 1 and "not a directory" in err and "Traceback" not in err, err


# ---------------------------------------------------------------------------------------
# small things (issue 12, item 10)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_extra_column_named_line_reaches_the_labels(fmt, tmp_path, sources, fake_server, capsys):
    rows = [{**r, "_line": f"L{i}"} for i, r in enumerate(GOOD)]
    path = tmp_path / f"c.{fmt}"
    if fmt == "jsonl":
        path.write_text(jsonl(rows))
    else:
        pd.DataFrame(rows).to_csv(path, index=False)
    code, out, err = run_inproc(capsys, "score", path, "--sources", sources, "--judge", "openai:gpt-4o-mini", "--base-url",
                                fake_server.openai_base_url, "--out", tmp_path / "run", "--cache-dir", tmp_path / "cache", "--no-progress")
    assert code == 0, err
    labels = [json.loads(line) for line in (tmp_path / "run" / "labels.jsonl").read_text().split("\n") if line]
    assert [x["_line"] for x in labels] == ["L0", "L1", "L2"]


# ---------------------------------------------------------------------------------------
# the one atomic writer (memjudge._util.files) and the formats package's public names (#14)


def test_a_write_replaces_the_file_whole_and_is_on_disk(tmp_path, monkeypatch):
    import os

    from memjudge._util import files

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.fstat(fd)), real_fsync(fd))[1])
    path = tmp_path / "run" / "summary.json"
    files.make_dir(path.parent)
    path.write_text("old")
    files.write_json(path, {"a": "é"}, ensure_ascii=False)
    assert path.read_text(encoding="utf-8") == '{"a": "é"}\n'
    assert not files.temp_path(path).exists()
    # the new file's data, then the folder's entry (the rename), reached the disk
    assert [s.st_ino for s in synced] == [path.stat().st_ino, path.parent.stat().st_ino]

    files.write_lines(path, (f"{i}\n" for i in range(3)), durable=False)
    assert path.read_text() == "0\n1\n2\n"


def test_a_failed_write_or_check_leaves_the_old_file_and_no_temporary(tmp_path):
    from memjudge._util import files

    path = tmp_path / "panel.toml"
    path.write_text("old")

    def rows():
        yield "half\n"
        raise RuntimeError("killed midway")

    with pytest.raises(RuntimeError, match="killed midway"):
        files.write_lines(path, rows())
    seen = []

    def refuse(tmp):
        seen.append(tmp.read_text())
        raise ValueError("not a valid panel")

    with pytest.raises(ValueError, match="not a valid panel"):
        files.write_atomic(path, "new", check=refuse)
    assert seen == ["new"]  # the check reads what was written, before it replaces anything
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["panel.toml"]

    files.write_atomic(path, b"\x00bytes", check=lambda tmp: None)
    assert path.read_bytes() == b"\x00bytes"


def test_a_unique_temporary_lets_two_writers_share_a_folder(tmp_path):
    from memjudge._util import files

    dest = tmp_path / "model.gguf"
    with files.atomic_file(dest, "wb", unique=True) as a, files.atomic_file(dest, "wb", unique=True) as b:
        a.write(b"a")
        b.write(b"b")
        temporaries = sorted(p.name for p in tmp_path.iterdir())
        assert len(temporaries) == 2 and all(n.startswith("model.gguf.") and n.endswith(".part") for n in temporaries)
    assert dest.read_bytes() == b"a" and sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf"]
    with pytest.raises(ValueError, match="writes only"):
        with files.atomic_file(dest, "a"):
            pass


def test_links_are_refused_at_the_temporary_and_replaced_at_the_target(tmp_path):
    from memjudge._util import files
    from memjudge.errors import UsageError

    victim = tmp_path / "victim"
    victim.write_text("precious")
    path = tmp_path / "labels.jsonl"
    files.temp_path(path).symlink_to(victim)
    with pytest.raises(UsageError, match="is a symbolic link"):
        files.write_atomic(path, "x")
    with pytest.raises(UsageError, match="is a symbolic link"):
        files.refuse_links([path, files.temp_path(path)])
    assert victim.read_text() == "precious" and files.temp_path(path).is_symlink()  # not ours: left alone
    files.temp_path(path).unlink()
    path.symlink_to(victim)
    files.write_atomic(path, "new")  # a link at PATH itself is replaced, not followed
    assert not path.is_symlink() and path.read_text() == "new" and victim.read_text() == "precious"


def test_the_formats_package_reexports_its_modules_public_names():
    import memjudge.formats as formats
    from memjudge.formats import columns, estimate, readers, writers

    names = set(formats.__all__)
    for module in (columns, readers, writers):
        assert set(module.__all__) <= names, module.__name__
        for name in module.__all__:
            assert getattr(formats, name) is getattr(module, name)
    assert formats.Estimate is estimate.Estimate
    assert all(hasattr(formats, n) for n in formats.__all__)
    # the run-folder helpers are the shared writer's, not copies
    from memjudge._util import files

    assert formats.write_atomic is files.write_atomic and formats.open_private is files.open_private



@pytest.mark.parametrize("bad", ["1", 1, -1, True, "zero"])
def test_replicate_of_must_name_an_earlier_replicate(bad, tmp_path, cli):
    """A labels file's replicate_of (the replicate a deterministic judge's row copies) is null or
    an earlier replicate of the same item: anything else is one line `file:line:` and status 2."""
    rows = [{"assertion_id": "a1", "persona_id": "p1", "category": "c", "judge": "local:m", "rubric": "support",
             "replicate": r, "verdict": "supported", "replicate_of": None if r == 0 else 0} for r in (0, 1)]
    rows[1]["replicate_of"] = bad
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = cli("noise", path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"{path}:2: 'replicate_of' must be null or an earlier replicate than 1")
    rows[1]["replicate_of"] = 0
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ok = cli("noise", path, "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["judges"][0]["by_construction"] is True


def test_json_safe_makes_plain_json_of_every_value_a_frame_holds():
    """Hand-worked: numpy and pandas scalars become Python ones, NaN and ±inf (of either kind)
    null, keys text, tuples and arrays lists, paths their text; a plain value is itself (the
    fast path for exact types must not let a subclass or a non-finite float through)."""
    import math

    import numpy as np

    from memjudge.formats import json_safe

    class Text(str):
        pass

    given = {
        "s": "a", "sub": Text("b"), "i": 3, "t": True, "f": 0.5, "none": None, "nan": math.nan, "inf": -math.inf,
        "np": [np.int64(4), np.float32(0.25), np.bool_(False), np.float64("nan"), np.float64("inf")],
        "na": [pd.NA, pd.NaT], "tuple": (1, (2.0, "x")), "array": np.array([[1, 2], [3, 4]]),
        "path": Path("runs") / "sim", 7: {"nested": {1.5: [math.inf, 2]}},
    }
    out = json_safe(given)
    assert out == {
        "s": "a", "sub": "b", "i": 3, "t": True, "f": 0.5, "none": None, "nan": None, "inf": None,
        "np": [4, 0.25, False, None, None], "na": [None, None], "tuple": [1, [2.0, "x"]], "array": [[1, 2], [3, 4]],
        "path": str(Path("runs") / "sim"), "7": {"nested": {"1.5": [None, 2]}},
    }
    assert [type(v) for v in out["np"][:3]] == [int, float, bool] and type(out["t"]) is bool
    assert json.loads(json.dumps(out, allow_nan=False)) == out
    with pytest.raises(TypeError, match="not JSON-serialisable: object"):
        json_safe({"x": object()})
