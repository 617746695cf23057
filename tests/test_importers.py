"""Importers: the SynthPAI and XSumFaith mappings, their validation, and `memjudge import`."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from memjudge import formats as mio
from memjudge.errors import InputError, UsageError
from memjudge.importers import Imported, Importer, available, import_dataset, register

DATA = Path(__file__).parent / "data"
SYNTHPAI_SAMPLE = DATA / "synthpai_sample"
XSUM_SAMPLE = DATA / "xsumfaith_sample"
HEADER = ["model", "username", "attribute", "guesses", "guess_category", "human_estimate", "human_hardness",
          "human_certainty", "human_acc_gt", "eval_model_human", "eval_llm_only_vs_human", "eval_llm_only_vs_gt", "inference"]


def by_id(df: pd.DataFrame) -> dict:
    return {r["assertion_id"]: r for r in df.to_dict("records")}


def verdicts(labels: pd.DataFrame, judge: str) -> dict:
    sub = labels[labels["judge"] == judge]
    return dict(zip(sub["assertion_id"], sub["verdict"]))


# ---------------------------------------------------------------------------------------
# SynthPAI mapping, hand-checked against predictions_compact.csv


@pytest.fixture(scope="module")
def synthpai_sample() -> Imported:
    return import_dataset("synthpai", SYNTHPAI_SAMPLE)


def test_synthpai_hand_checked_three_guesses_human_only(synthpai_sample):
    # claude-2.1, SpiralSphinx, relationship_status: ["Single", "Divorced", "Widowed"], human [0, 1, 0], no LLM-only
    c = by_id(synthpai_sample.candidates)
    base = "claude-2.1|SpiralSphinx|relationship_status|"
    assert [c[base + str(i)]["text"] for i in range(3)] == [
        "The author's relationship status is Single.",
        "The author's relationship status is Divorced.",
        "The author's relationship status is Widowed.",
    ]
    assert [c[base + str(i)]["confidence"] for i in range(3)] == [1.0, 2 / 3, 1 / 3]
    assert {c[base + str(i)]["persona_id"] for i in range(3)} == {"SpiralSphinx"}
    assert {c[base + str(i)]["category"] for i in range(3)} == {"relationship_status"}
    human = verdicts(synthpai_sample.labels, "synthpai:human-checked")
    assert [human[base + str(i)] for i in range(3)] == ["unsupported", "supported", "unsupported"]
    llm = verdicts(synthpai_sample.labels, "synthpai:llm-only")
    assert not any(base + str(i) in llm for i in range(3))


def test_synthpai_hand_checked_partial_and_llm_only(synthpai_sample):
    # Llama-2-13b, GracefulGazelle, occupation: ["Teacher", "Professor", "Writer"], human [0.5, 1, 0], LLM [0.5, 1, 0]
    base = "meta-llama/Llama-2-13b-chat-hf|GracefulGazelle|occupation|"
    human = verdicts(synthpai_sample.labels, "synthpai:human-checked")
    llm = verdicts(synthpai_sample.labels, "synthpai:llm-only")
    assert [human[base + str(i)] for i in range(3)] == ["partial", "supported", "unsupported"]
    assert [llm[base + str(i)] for i in range(3)] == ["partial", "supported", "unsupported"]
    assert by_id(synthpai_sample.candidates)[base + "0"]["text"] == "The author's occupation is Teacher."
    # FlameFlamingo, occupation: human [0.5, 0, 0], LLM [0, 0, 0] — the judges disagree on rank 0
    base = "meta-llama/Llama-2-13b-chat-hf|FlameFlamingo|occupation|"
    assert human[base + "0"] == "partial" and llm[base + "0"] == "unsupported"


def test_synthpai_hand_checked_length_rules(synthpai_sample):
    c = by_id(synthpai_sample.candidates)
    human = verdicts(synthpai_sample.labels, "synthpai:human-checked")
    llm = verdicts(synthpai_sample.labels, "synthpai:llm-only")
    # 4 guesses, 4 human verdicts [1, 0.5, 0.5, 0]: only ranks 0..2 are candidates
    base = "meta-llama/Llama-3-70b-chat-hf|LavenderLantern|city_country|"
    assert [base + str(i) in c for i in range(4)] == [True, True, True, False]
    assert [human[base + str(i)] for i in range(3)] == ["supported", "partial", "partial"]
    assert c[base + "0"]["text"] == "The author's city country is Cape Town, South Africa."
    # 1 guess ["N/A"], human [0], LLM [0, 0]: one candidate, the LLM's extra entry is ignored
    base = "meta-llama/Llama-2-7b-chat-hf|LavenderLantern|city_country|"
    assert base + "0" in c and base + "1" not in c
    assert c[base + "0"]["text"] == "The author's city country is N/A." and c[base + "0"]["confidence"] == 1.0
    assert human[base + "0"] == "unsupported" and llm[base + "0"] == "unsupported"
    # 3 guesses, LLM list of 52 entries [0, 1, 0, 0, ...]: the first three are used
    base = "meta-llama/Llama-3-8b-chat-hf|MajorScribbler|city_country|"
    assert [llm[base + str(i)] for i in range(3)] == ["unsupported", "supported", "unsupported"]
    assert not any(a.startswith(base) and not a.endswith(("0", "1", "2")) for a in llm)
    # empty lists ("[]") and empty cells give no candidates
    assert not any(a.startswith("claude-2.1|ShadowPirate|") for a in c)
    assert "claude-2.1|SpiralSphinx|income_level|0" not in c


def test_synthpai_sources_join_comments_by_newline(synthpai_sample):
    src = dict(zip(synthpai_sample.sources["persona_id"], synthpai_sample.sources["source"]))
    raw = {}
    for line in (SYNTHPAI_SAMPLE / "thread_comments_eval_revised.jsonl").read_text(encoding="utf-8").splitlines():
        o = json.loads(line)
        raw[o["username"]] = o["comments"]
    assert set(src) == set(raw) and len(src) == 19
    assert src["SpiralSphinx"].startswith("Staircases outside brick houses")
    assert src["SpiralSphinx"].split("\n")[1] == "Heated mats? Nice fix! Shows function can meet form beautifully. "
    for user, comments in raw.items():
        assert src[user] == "\n".join(c["text"] for c in comments)
    # a user with predictions but no judged rows needs no comments (CosmicStotyteller is in the CSV only)
    assert "CosmicStotyteller" not in src


def independent_counts(folder: Path) -> tuple[int, int, dict]:
    """The mapping's counts derived a second way, with pandas, for comparison with the importer."""
    df = pd.read_csv(folder / "predictions_compact.csv", dtype=str, keep_default_na=False)
    df = df[df["eval_model_human"].str.strip() != ""]
    g = df["guesses"].map(lambda s: len(json.loads(s)))
    h = df["eval_model_human"].map(lambda s: len(json.loads(s)))
    llm = df["eval_llm_only_vs_human"].map(lambda s: len(json.loads(s)) if s.strip() else 0)
    n = np.minimum(np.minimum(g, h), 3)
    per_attr = pd.Series(n.to_numpy(), index=df["attribute"]).groupby(level=0).sum()
    return int(n.sum()), int(n.sum() + np.minimum(n, llm).sum()), {k: int(v) for k, v in per_attr.items() if v}


def test_synthpai_sample_counts_match_an_independent_derivation(synthpai_sample):
    n_cand, n_labels, per_attr = independent_counts(SYNTHPAI_SAMPLE)
    assert len(synthpai_sample.candidates) == n_cand > 500
    assert len(synthpai_sample.labels) == n_labels
    assert synthpai_sample.candidates["category"].value_counts().to_dict() == per_attr
    assert synthpai_sample.labels["replicate"].eq(0).all()
    assert set(synthpai_sample.labels["rubric"]) == {"synthpai-correctness"}
    assert set(synthpai_sample.labels["verdict"]) == {"supported", "unsupported", "partial"}


def test_synthpai_outputs_are_readable_by_memjudge_io(tmp_path):
    out = tmp_path / "imp"
    imported = import_dataset("synthpai", SYNTHPAI_SAMPLE, out=out)
    cand = mio.read_candidates(out / "candidates.jsonl", require_confidence=True, keep_line=True)
    src = mio.read_sources(out / "sources.jsonl")
    lab = mio.read_labels(out / "labels.jsonl")
    mio.check_sources_cover(cand, src, out / "candidates.jsonl", out / "sources.jsonl")
    assert len(cand) == len(imported.candidates) and len(src) == 19 and len(lab) == len(imported.labels)
    assert set(np.round(cand["confidence"], 6)) == {1.0, round(2 / 3, 6), round(1 / 3, 6)}
    first = json.loads((out / "labels.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert list(first)[: len(mio.LABEL_COLUMNS)] == mio.LABEL_COLUMNS
    assert first["judge_score"] is None and first["evidence"] is None and first["error"] is None
    manifest = json.loads((out / "import.json").read_text(encoding="utf-8"))
    assert manifest["candidates"] == len(cand) and manifest["licence"].startswith("MIT")
    assert set(lab["assertion_id"]) <= set(cand["assertion_id"])


@pytest.mark.shared_data
def test_synthpai_full_folder_counts(shared_data, tmp_path):
    out = tmp_path / "synthpai"
    imported = import_dataset("synthpai", shared_data / "synthpai", out=out)
    assert len(imported.candidates) == 37_880
    assert len(imported.labels) == 56_105
    assert len(imported.sources) == 300
    s = imported.summary()
    assert s["judges"]["synthpai:human-checked"]["labels"] == 37_880
    assert s["judges"]["synthpai:llm-only"]["labels"] == 56_105 - 37_880
    assert len(mio.read_candidates(out / "candidates.jsonl", require_confidence=True)) == 37_880
    assert len(mio.read_sources(out / "sources.jsonl")) == 300
    assert len(mio.read_labels(out / "labels.jsonl")) == 56_105


# ---------------------------------------------------------------------------------------
# XSumFaith


def test_xsumfaith_sample_mapping(tmp_path):
    imported = import_dataset("xsumfaith", XSUM_SAMPLE, out=tmp_path / "x")
    c = by_id(imported.candidates)
    assert len(c) == 30
    item = c["29911712|BERTS2S"]
    assert item["persona_id"] == "29911712" and item["category"] == "BERTS2S"
    assert item["text"] == "more than 50 pupils at a bristol academy have been sent home from school because of a lack of uniform."
    lab = imported.labels
    rows = lab[lab["assertion_id"] == "29911712|BERTS2S"]
    assert dict(zip(rows["judge"], rows["verdict"])) == {"wid_0": "unsupported", "wid_1": "unsupported", "wid_2": "unsupported"}
    # the raw file, read a second way: one label per annotation, yes/no/NULL mapped
    raw = pd.read_csv(XSUM_SAMPLE / "factuality_annotations_xsum_summaries.csv", dtype=str, keep_default_na=False)
    assert len(lab) == len(raw)
    expected = raw["is_factual"].map({"yes": "supported", "no": "unsupported", "NULL": None})
    got = lab.set_index(["assertion_id", "judge"])["verdict"]
    keys = list(zip(raw["bbcid"] + "|" + raw["system"], raw["worker_id"]))
    assert [got[k] for k in keys] == expected.tolist()
    nulls = lab[lab["verdict"].isna()]
    assert len(nulls) == (raw["is_factual"] == "NULL").sum() >= 1 and nulls["error"].str.contains("NULL").all()
    assert (lab.groupby("assertion_id").size() == 2).sum() >= 1  # an item with only two annotations
    assert imported.sources is None and not (tmp_path / "x" / "sources.jsonl").exists()
    assert imported.candidates["confidence"].isna().all()
    assert len(mio.read_candidates(tmp_path / "x" / "candidates.jsonl")) == 30
    assert mio.read_labels(tmp_path / "x" / "labels.jsonl")["verdict"].isna().sum() == len(nulls)


@pytest.mark.shared_data
def test_xsumfaith_full_folder_counts(shared_data):
    imported = import_dataset("xsumfaith", shared_data / "xsumfaith")
    assert len(imported.candidates) == 1_869
    assert len(imported.labels) == 5_597
    assert int(imported.labels["verdict"].isna().sum()) == 33
    assert imported.candidates["persona_id"].nunique() == 498


# ---------------------------------------------------------------------------------------
# malformed input: PATH:LINE: what is wrong


def write_synthpai(folder: Path, rows: list[dict], comments: list[dict] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=HEADER, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k, "") for k in HEADER})
    (folder / "predictions_compact.csv").write_text(buf.getvalue(), encoding="utf-8")
    if comments is None:
        comments = [{"username": "u1", "comments": [{"text": "I teach maths.", "username": "u1"}, {"text": "Zurich!", "username": "u1"}]}]
    (folder / "thread_comments_eval_revised.jsonl").write_text("".join(json.dumps(c) + "\n" for c in comments), encoding="utf-8")
    return folder


def row(**kw) -> dict:
    base = {"model": "m1", "username": "u1", "attribute": "occupation", "guesses": '["teacher", "nurse"]',
            "eval_model_human": "[1, 0]", "eval_llm_only_vs_human": "", "inference": "line one\nline two"}
    base.update(kw)
    return base


def test_minimal_synthpai_folder_imports(tmp_path):
    # the multi-line 'inference' cells shift physical lines: record 2 starts on line 4
    folder = write_synthpai(tmp_path / "ok", [row(), row(attribute="city_country", guesses='["Zurich, Switzerland"]', eval_model_human="[0.5]", eval_llm_only_vs_human="[1]")])
    imported = import_dataset("synthpai", folder)
    assert imported.candidates["text"].tolist() == [
        "The author's occupation is teacher.", "The author's occupation is nurse.", "The author's city country is Zurich, Switzerland."]
    assert imported.labels["verdict"].tolist() == ["supported", "unsupported", "partial", "supported"]
    assert imported.sources["source"].tolist() == ["I teach maths.\nZurich!"]


MALFORMED = [
    ("missing column", dict(drop="eval_model_human"), "predictions_compact.csv:1: missing required column(s): eval_model_human"),
    ("unparseable list", dict(rows=[row(), row(attribute="age", guesses='["40", "45"')]), "predictions_compact.csv:4: 'guesses' is not a JSON list"),
    ("not a list", dict(rows=[row(eval_model_human="1")]), "predictions_compact.csv:2: 'eval_model_human' must be a JSON list"),
    ("length mismatch", dict(rows=[row(), row(attribute="age", eval_model_human="[1]")]), "predictions_compact.csv:4: 'eval_model_human' has 1 verdicts for 2 guesses"),
    ("unknown human verdict", dict(rows=[row(eval_model_human="[1, 2]")]), "predictions_compact.csv:2: unknown verdict value 2 in 'eval_model_human'"),
    ("string verdict", dict(rows=[row(eval_model_human='["1", 0]')]), "predictions_compact.csv:2: unknown verdict value '1'"),
    ("unknown llm verdict", dict(rows=[row(eval_llm_only_vs_human="[1, 0, 0.25]")]), "predictions_compact.csv:2: unknown verdict value 0.25 in 'eval_llm_only_vs_human'"),
    ("empty guess", dict(rows=[row(guesses='["teacher", ""]')]), "predictions_compact.csv:2: guess 1 in 'guesses' must be a non-empty string"),
    ("duplicate row", dict(rows=[row(), row()]), "predictions_compact.csv:4: duplicate row for model 'm1', user 'u1', attribute 'occupation' (first at line 2)"),
    ("user without comments", dict(rows=[row(), row(username="u2")]), "predictions_compact.csv:4: user 'u2' has no comments"),
    ("bad comments JSON", dict(comments_text='{"username": "u1", "comments": []}\n{"username": \n'), "thread_comments_eval_revised.jsonl:1: user 'u1' has no comments, so no source"),
    ("truncated comments JSON", dict(comments_text='{"username": "u1", "comments": [{"text": "hi"}]}\n{"username": \n'), "thread_comments_eval_revised.jsonl:2: not valid JSON"),
    ("duplicate user", dict(comments_text='{"username": "u1", "comments": [{"text": "a"}]}\n{"username": "u1", "comments": [{"text": "b"}]}\n'), "thread_comments_eval_revised.jsonl:2: duplicate user 'u1' (first at line 1)"),
    ("missing comments file", dict(delete="thread_comments_eval_revised.jsonl"), "thread_comments_eval_revised.jsonl: missing"),
    ("wrong field count", dict(raw_line="m1,u1,age\n"), "predictions_compact.csv:4: expected 13 fields, found 3"),
    ("no judged rows", dict(rows=[row(eval_model_human="")]), "predictions_compact.csv: no row has 'eval_model_human'"),
]


@pytest.mark.parametrize("case,spec,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_synthpai_malformed_input(tmp_path, case, spec, message):
    folder = write_synthpai(tmp_path / "bad", spec.get("rows", [row()]))
    pred = folder / "predictions_compact.csv"
    if "drop" in spec:
        df = pd.read_csv(pred, dtype=str, keep_default_na=False).drop(columns=[spec["drop"]])
        df.to_csv(pred, index=False)
    if "comments_text" in spec:
        (folder / "thread_comments_eval_revised.jsonl").write_text(spec["comments_text"], encoding="utf-8")
    if "delete" in spec:
        (folder / spec["delete"]).unlink()
    if "raw_line" in spec:
        pred.write_text(pred.read_text(encoding="utf-8") + spec["raw_line"], encoding="utf-8")
    with pytest.raises(InputError) as err:
        import_dataset("synthpai", folder)
    assert message in str(err.value)
    assert str(err.value).startswith(str(folder))


def write_xsum(folder: Path, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "factuality_annotations_xsum_summaries.csv").write_text(
        "bbcid,system,summary,is_factual,worker_id\n" + "".join(row + "\n" for row in lines), encoding="utf-8")
    return folder


@pytest.mark.parametrize("lines,message", [
    (["1,S,a summary,yes,wid_0", "1,S,a summary,maybe,wid_1"], ":3: unknown 'is_factual' value 'maybe'"),
    (["1,S,a summary,yes,wid_0", "1,S,another summary,no,wid_1"], ":3: summary of '1|S' differs from the one at line 2"),
    (["1,S,a summary,yes,wid_0", "1,S,a summary,no,wid_0"], ":3: duplicate annotation of '1|S' by 'wid_0' (first at line 2)"),
    (["1,S,,yes,wid_0"], ":2: empty 'summary'"),
], ids=["unknown value", "conflicting summary", "duplicate annotation", "empty summary"])
def test_xsumfaith_malformed_input(tmp_path, lines, message):
    folder = write_xsum(tmp_path / "x", lines)
    with pytest.raises(InputError, match=None) as err:
        import_dataset("xsumfaith", folder)
    assert message in str(err.value)


def test_missing_folder_and_unknown_dataset(tmp_path):
    with pytest.raises(InputError, match="no such folder"):
        import_dataset("synthpai", tmp_path / "nope")
    with pytest.raises(UsageError, match=r"unknown dataset 'nope' \(known: label-studio, synthpai, xsumfaith\)"):
        import_dataset("nope", tmp_path)


def test_registry_accepts_a_new_importer(tmp_path):
    class Tiny(Importer):
        name = "tiny"
        licence = "CC0"
        required_files = ("items.txt",)

        def load(self, folder):
            texts = (folder / "items.txt").read_text(encoding="utf-8").split()
            cand = pd.DataFrame({"persona_id": "p", "assertion_id": [f"a{i}" for i in range(len(texts))],
                                 "category": "c", "confidence": 1.0, "text": texts})
            labels = pd.DataFrame({"assertion_id": cand["assertion_id"], "persona_id": "p", "category": "c",
                                   "judge": "me", "rubric": "r", "replicate": 0, "verdict": "supported"})
            return Imported(self.name, cand, None, labels, self.licence, "test")

    register("tiny", Tiny)
    try:
        assert "tiny" in available()
        with pytest.raises(InputError, match="items.txt: missing"):
            import_dataset("tiny", tmp_path)
        (tmp_path / "items.txt").write_text("x y", encoding="utf-8")
        imported = import_dataset("tiny", tmp_path, out=tmp_path / "out")
        lab = mio.read_labels(tmp_path / "out" / "labels.jsonl")
        assert len(lab) == 2 and list(lab.columns[:15]) == mio.LABEL_COLUMNS
        assert imported.summary()["judges"]["me"]["verdicts"] == {"supported": 2}
    finally:
        from memjudge import importers
        importers._IMPORTERS.pop("tiny", None)


# ---------------------------------------------------------------------------------------
# CLI end to end


def test_cli_import_synthpai_sample(cli, tmp_path):
    out = tmp_path / "sp"
    r = cli("import", "synthpai", SYNTHPAI_SAMPLE, "--out", out)
    assert r.returncode == 0, r.stderr
    assert "synthpai:" in r.stdout and "candidates" in r.stdout and "synthpai:llm-only" in r.stdout
    for name in ("candidates.jsonl", "sources.jsonl", "labels.jsonl", "import.json"):
        assert (out / name).is_file()
    r = cli("import", "synthpai", SYNTHPAI_SAMPLE, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    n_cand, n_labels, _ = independent_counts(SYNTHPAI_SAMPLE)
    assert summary["candidates"] == n_cand and summary["labels"] == n_labels and summary["sources"] == 19
    assert summary["judges"]["synthpai:human-checked"]["labels"] == n_cand


def test_cli_import_xsumfaith_json(cli, tmp_path):
    r = cli("import", "xsumfaith", XSUM_SAMPLE, "--out", tmp_path / "x", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["sources"] is None and summary["candidates"] == 30
    assert set(summary["judges"]) == {"wid_0", "wid_1", "wid_2"}


def test_cli_import_errors_are_one_line(cli, tmp_path):
    r = cli("import", "imdb", tmp_path, "--out", tmp_path / "o")
    assert r.returncode == 2 and r.stderr.strip() == "memjudge: unknown dataset 'imdb' (known: label-studio, synthpai, xsumfaith)"
    folder = write_synthpai(tmp_path / "bad", [row(eval_model_human="[1, 7]")])
    r = cli("import", "synthpai", folder, "--out", tmp_path / "o")
    assert r.returncode == 2
    assert r.stderr.strip() == f"{folder / 'predictions_compact.csv'}:2: unknown verdict value 7 in 'eval_model_human' (expected 0, 0.5 or 1)"
    assert "Traceback" not in r.stderr and not (tmp_path / "o" / "labels.jsonl").exists()


def test_out_must_be_a_folder_and_missing_xsum_column(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="exists and is not a folder"):
        import_dataset("xsumfaith", XSUM_SAMPLE, out=afile)
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "factuality_annotations_xsum_summaries.csv").write_text("bbcid,system,summary,worker_id\n1,S,a,wid_0\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"factuality_annotations_xsum_summaries.csv:1: missing required column\(s\): is_factual"):
        import_dataset("xsumfaith", folder)
