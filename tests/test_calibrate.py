"""Threshold calibration on judge_score: measures against scikit-learn, the panel file, the CLI."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import balanced_accuracy_score, roc_auc_score

from memjudge.errors import UsageError
from memjudge.judges.panel import load_panel, write_threshold
from memjudge.stats.thresholds import (
    auc,
    balanced_accuracy,
    best_threshold,
    calibrate,
    calibrate_scores,
    candidate_thresholds,
)


def _synthetic(n=400, seed=0, ties=False):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.35
    s = rng.normal(np.where(y, 1.0, -0.5), 1.2)
    if ties:
        s = np.round(s, 1)
    return s, y


@pytest.mark.parametrize("ties", [False, True])
def test_auc_matches_sklearn(ties):
    s, y = _synthetic(ties=ties)
    assert auc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_auc_hand_case_and_degenerate():
    # pairs (pos, neg): (3>1) (3>2) (2=2 -> 1/2) (2>1) -> 3.5 / 4
    assert auc([3, 2, 1, 2], [True, True, False, False]) == pytest.approx(0.875)
    assert np.isnan(auc([1, 2], [True, True]))


def test_balanced_accuracy_matches_sklearn():
    s, y = _synthetic(seed=3)
    for t in (-1.0, 0.0, 0.37, 2.0):
        assert balanced_accuracy(s, y, t) == pytest.approx(balanced_accuracy_score(y, s >= t), abs=1e-12)


def test_best_threshold_is_the_brute_force_optimum():
    s, y = _synthetic(seed=5, ties=True)
    t, value = best_threshold(s, y)
    brute = max(balanced_accuracy_score(y, s >= c) for c in candidate_thresholds(s))
    assert value == pytest.approx(brute, abs=1e-12)
    assert balanced_accuracy_score(y, s >= t) == pytest.approx(brute, abs=1e-12)


def test_best_threshold_separable_case_sits_between_classes():
    t, value = best_threshold([-3.0, -2.0, 1.0, 2.0], [False, False, True, True])
    assert value == 1.0 and -2.0 < t < 1.0


def test_best_threshold_needs_both_classes():
    with pytest.raises(UsageError):
        best_threshold([0.1, 0.2], [True, True])


def test_real_data_summedits_style_scores(shared_data):
    # Real labels (SummEdits sales calls) scored by how far each summary's length moved from the
    # original's: a real, weak signal with many ties.
    items = json.loads((shared_data / "summedits" / "summedits_sales_call.json").read_text())
    y = np.array([str(i["label"]) == "1" for i in items])
    s = -np.array([abs(len(i["summary"]) - len(i["original_summary"])) for i in items], float)
    cal = calibrate_scores(s, y, "x")
    assert cal.auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert cal.balanced_accuracy == pytest.approx(balanced_accuracy_score(y, s >= cal.threshold), abs=1e-12)


def test_write_threshold_creates_and_updates_panel(tmp_path):
    panel = tmp_path / "judges.toml"
    panel.write_text(
        '[[judge]]\nspec = "openai:gpt-4o-mini"\ntemperature = 0\nconcurrency = 32\n\n'
        '[[judge]]\nspec = "local:qwen2.5-coder-1.5b"\nseed = 7\n[judge.options]\nthreshold = 9.0\nn_ctx = 4096\n'
    )
    write_threshold(panel, "local:qwen2.5-coder-1.5b", -1.25)
    cfg = load_panel(panel)
    assert cfg["local:qwen2.5-coder-1.5b"].options == {"threshold": -1.25, "n_ctx": 4096}
    assert cfg["local:qwen2.5-coder-1.5b"].seed == 7
    assert cfg["openai:gpt-4o-mini"].concurrency == 32
    write_threshold(panel, "local:/models/other.gguf", 0.5)
    cfg = load_panel(panel)
    assert cfg["local:/models/other.gguf"].options["threshold"] == 0.5 and len(cfg) == 3
    fresh = tmp_path / "new" / "judges.toml"
    write_threshold(fresh, "local:qwen2.5-coder-1.5b", 0.0)
    assert tomllib.loads(fresh.read_text())["judge"][0]["options"]["threshold"] == 0.0


def _labels_and_gold(tmp_path, judge="local:qwen2.5-coder-1.5b"):
    s, y = _synthetic(n=60, seed=11)
    labels = pd.DataFrame({
        "assertion_id": [f"a{i}" for i in range(60)], "persona_id": [f"p{i // 6}" for i in range(60)],
        "category": "c", "judge": judge, "rubric": "support@x", "replicate": 0,
        "verdict": np.where(s >= 0, "supported", "unsupported"), "judge_score": s,
    })
    gold = pd.DataFrame({"assertion_id": labels["assertion_id"], "verdict": np.where(y, "supported", "unsupported")})
    lp, gp = tmp_path / "labels.jsonl", tmp_path / "gold.jsonl"
    labels.to_json(lp, orient="records", lines=True)
    gold.to_json(gp, orient="records", lines=True)
    return lp, gp, s, y


def test_calibrate_api_matches_best_threshold(tmp_path):
    lp, gp, s, y = _labels_and_gold(tmp_path)
    cal = calibrate([lp], gp, "local:qwen2.5-coder-1.5b")
    assert not (tmp_path / "judges.toml").exists()  # statistics write nothing
    write_threshold(tmp_path / "judges.toml", cal.judge, cal.threshold, cal.category_thresholds)
    assert (cal.threshold, cal.target_value) == pytest.approx(best_threshold(s, y), abs=1e-9)
    assert load_panel(tmp_path / "judges.toml")["local:qwen2.5-coder-1.5b"].options["threshold"] == cal.threshold


def test_cli_calibrate_writes_panel_and_prints(tmp_path, cli):
    lp, gp, s, y = _labels_and_gold(tmp_path)
    panel = tmp_path / "judges.toml"
    r = cli("calibrate", lp, "--gold", gp, "--judge", "local:qwen2.5-coder-1.5b", "--panel", panel, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    t, _ = best_threshold(s, y)
    assert out["threshold"] == pytest.approx(t)
    assert out["auc"] == pytest.approx(roc_auc_score(y, s))
    assert load_panel(panel)["local:qwen2.5-coder-1.5b"].options["threshold"] == pytest.approx(t)


def test_cli_calibrate_errors_are_one_line(tmp_path, cli):
    lp, gp, _, _ = _labels_and_gold(tmp_path)
    r = cli("calibrate", lp, "--gold", gp, "--judge", "local:nope", "--panel", tmp_path / "p.toml")
    assert r.returncode == 2 and "no labels of judge 'local:nope'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = cli("calibrate", lp, "--gold", gp, "--judge", "local:qwen2.5-coder-1.5b", "--target", "magic")
    assert r.returncode == 2 and "unknown calibration target" in r.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("[[judge]\n")
    r = cli("calibrate", lp, "--gold", gp, "--judge", "local:qwen2.5-coder-1.5b", "--panel", broken)
    assert r.returncode == 2 and "broken.toml" in r.stderr and broken.read_text() == "[[judge]\n"
    assert not (tmp_path / "p.toml").exists()


def _two_category_labels(tmp_path, judge="local:qwen2.5-coder-1.5b"):
    """Values items sit higher on the score than facts for the same truth (a category shift),
    so one threshold fits neither."""
    rng = np.random.default_rng(21)
    n = 300
    cat = np.where(rng.random(n) < 0.4, "values", np.where(rng.random(n) < 0.5, "work", "family"))
    y = rng.random(n) < 0.45
    s = rng.normal(np.where(y, 1.0, -0.8), 1.0) + np.where(cat == "values", 1.5, 0.0)
    labels = pd.DataFrame({
        "assertion_id": [f"a{i}" for i in range(n)], "persona_id": [f"p{i // 10}" for i in range(n)],
        "category": cat, "judge": judge, "rubric": "support@x", "replicate": 0,
        "verdict": np.where(s >= 0, "supported", "unsupported"), "judge_score": s,
    })
    gold = pd.DataFrame({"assertion_id": labels["assertion_id"], "verdict": np.where(y, "supported", "unsupported")})
    lp, gp = tmp_path / "labels.jsonl", tmp_path / "gold.jsonl"
    labels.to_json(lp, orient="records", lines=True)
    gold.to_json(gp, orient="records", lines=True)
    return lp, gp, s, y, cat


def test_own_category_thresholds_are_each_groups_optimum_and_the_rule_is_scored_whole(tmp_path):
    lp, gp, s, y, cat = _two_category_labels(tmp_path)
    cal = calibrate([lp], gp, "local:qwen2.5-coder-1.5b", own=["values"])
    write_threshold(tmp_path / "judges.toml", cal.judge, cal.threshold, cal.category_thresholds)
    values = cat == "values"
    # Each threshold is the brute-force optimum on its own items (scikit-learn's measure).
    for mask, t in ((values, cal.category_thresholds["values"]), (~values, cal.threshold)):
        brute = max(balanced_accuracy_score(y[mask], s[mask] >= c) for c in candidate_thresholds(s[mask]))
        assert balanced_accuracy_score(y[mask], s[mask] >= t) == pytest.approx(brute, abs=1e-12)
    # The figures are the whole rule's: each item against its category's threshold.
    predicted = s >= np.where(values, cal.category_thresholds["values"], cal.threshold)
    assert cal.balanced_accuracy == pytest.approx(balanced_accuracy_score(y, predicted), abs=1e-12)
    assert cal.target_value == pytest.approx(cal.balanced_accuracy, abs=1e-12)
    assert cal.accuracy == pytest.approx((predicted == y).mean(), abs=1e-12)
    assert cal.auc == pytest.approx(roc_auc_score(y, s - cal.threshold_of(cat)), abs=1e-12)
    # The category shift is found, and the rule beats the one threshold it replaces.
    assert cal.category_thresholds["values"] - cal.threshold == pytest.approx(1.5, abs=0.6)
    assert cal.balanced_accuracy > calibrate([lp], gp, "local:qwen2.5-coder-1.5b").balanced_accuracy
    opts = load_panel(tmp_path / "judges.toml")["local:qwen2.5-coder-1.5b"].options
    assert opts == {"threshold": cal.threshold, "category_thresholds": {"values": cal.category_thresholds["values"]}}
    # A later calibration with one threshold removes the old categories' own: it decides them all.
    one = calibrate([lp], gp, "local:qwen2.5-coder-1.5b")
    write_threshold(tmp_path / "judges.toml", one.judge, one.threshold, one.category_thresholds)
    assert set(load_panel(tmp_path / "judges.toml")["local:qwen2.5-coder-1.5b"].options) == {"threshold"}


def test_cli_own_threshold_prints_writes_and_refuses_a_one_class_category(tmp_path, cli):
    lp, gp, s, y, cat = _two_category_labels(tmp_path)
    panel = tmp_path / "judges.toml"
    r = cli("calibrate", lp, "--gold", gp, "--judge", "local:qwen2.5-coder-1.5b", "--panel", panel,
            "--own-threshold", "values", "--own-threshold", "work")
    assert r.returncode == 0, r.stderr
    cal = calibrate([lp], gp, "local:qwen2.5-coder-1.5b", own=["values", "work"])
    assert f"threshold {cal.threshold:+.4f} (the other categories)" in r.stdout
    assert f"category values: threshold {cal.category_thresholds['values']:+.4f} of its own" in r.stdout
    assert f"category work: threshold {cal.category_thresholds['work']:+.4f} of its own" in r.stdout
    assert load_panel(panel)["local:qwen2.5-coder-1.5b"].options["category_thresholds"] == pytest.approx(
        cal.category_thresholds)
    # A category without both classes in the gold cannot have a threshold of its own: one line, exit 2,
    # and the panel written before is kept.
    before = panel.read_text()
    gold = pd.read_json(gp, lines=True)
    gold.loc[cat == "work", "verdict"] = "supported"
    gold.to_json(gp, orient="records", lines=True)
    r = cli("calibrate", lp, "--gold", gp, "--judge", "local:qwen2.5-coder-1.5b", "--panel", panel,
            "--own-threshold", "work")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "category 'work' needs gold labels of both classes" in r.stderr and "0 unsupported" in r.stderr
    r = cli("calibrate", lp, "--gold", gp, "--judge", "local:qwen2.5-coder-1.5b", "--panel", panel,
            "--own-threshold", "hobbies")
    assert r.returncode == 2 and "category 'hobbies' needs gold labels of both classes" in r.stderr
    assert "(no items)" in r.stderr and panel.read_text() == before
