"""Judge panels (`memjudge panel`, `memjudge.panel`): consensus labels and each judge's error
rates, checked against crowd-kit (DawidSkene, OneCoinDawidSkene) on real and simulated data,
a hand-made majority case, and a simulated corpus with declared error rates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import memjudge
from conftest import TEST_DATA
from memjudge.cli import main
from memjudge.formats import LABEL_COLUMNS, frame_records, read_labels, write_jsonl

crowdkit = pytest.importorskip("crowdkit.aggregation")
# crowd-kit 1.4.2 uses pandas keywords that pandas 3 deprecates: its warnings are not ours
pytestmark = pytest.mark.filterwarnings("ignore::Warning:crowdkit")

XSUM_SAMPLE = TEST_DATA / "agreement_samples" / "xsumfaith_factuality_sample.csv"
TOL = 1e-6


# ---------------------------------------------------------------------------------------
# data


def xsum_labels(path=XSUM_SAMPLE) -> pd.DataFrame:
    """XSumFaith's three annotators as a labels frame (yes → supported, no → unsupported)."""
    df = pd.read_csv(path, dtype=str)
    df = df[df["is_factual"].isin(["yes", "no"])]
    return pd.DataFrame({
        "assertion_id": df["bbcid"] + "|" + df["system"], "persona_id": df["bbcid"], "category": df["system"],
        "judge": df["worker_id"], "rubric": "xsumfaith", "replicate": 0,
        "verdict": np.where(df["is_factual"] == "yes", "supported", "unsupported")})


def ds_labels(seed: int, n: int = 400, classes=("supported", "unsupported"), judges: int = 4,
              missing: float = 0.2) -> pd.DataFrame:
    """A simulated panel drawn from a Dawid–Skene model with random confusion matrices and
    some missing responses (every item keeps at least one)."""
    rng = np.random.default_rng(seed)
    K = len(classes)
    prior = rng.dirichlet(np.full(K, 2.0)) * 0.5 + np.eye(K)[0] * 0.5
    z = rng.choice(K, size=n, p=prior)
    rows = []
    for j in range(judges):
        conf = np.array([rng.dirichlet(np.where(np.arange(K) == c, 12.0, 1.5)) for c in range(K)])  # [true, said]
        keep = (rng.random(n) >= missing) | (j == 0)
        for i in np.flatnonzero(keep):
            said = rng.choice(K, p=conf[z[i]])
            rows.append((f"t{i}", f"p{i // 5}", "c", f"w{j}", "support", 0, classes[said]))
    return pd.DataFrame(rows, columns=["assertion_id", "persona_id", "category", "judge", "rubric", "replicate", "verdict"])


def crowd_fit(labels: pd.DataFrame, method: str):
    cls = crowdkit.DawidSkene if method == "dawid-skene" else crowdkit.OneCoinDawidSkene
    data = pd.DataFrame({"task": labels["assertion_id"], "worker": labels["judge"], "label": labels["verdict"]})
    return cls().fit(data)


def assert_equals_crowdkit(res, labels: pd.DataFrame, method: str) -> None:
    """Posteriors P(supported), prior, confusion matrices and iterations equal crowd-kit's."""
    ck = crowd_fit(labels, method)
    got = res.labels.set_index("assertion_id")["judge_score"]
    want = ck.probas_["supported"].reindex(got.index)
    assert want.notna().all()
    np.testing.assert_allclose(got.to_numpy(float), want.to_numpy(float), atol=TOL, rtol=0)
    for label, p in ck.priors_.items():
        assert res.prior[label] == pytest.approx(p, abs=TOL)
    assert res.iterations == len(ck.loss_history_)
    checked = 0
    for row in res.judge_errors:
        for said, cols in row["confusion"].items():
            key = (row["judge"], said)
            if key not in ck.errors_.index:
                continue  # crowd-kit keeps no row for a label the judge never gave
            for true, v in cols.items():
                assert v == pytest.approx(ck.errors_.loc[key, true], abs=TOL), (key, true)
                checked += 1
    assert checked >= len(res.judges) * 2
    # crowd-kit's consensus label is the most probable class
    mine = res.labels.set_index("assertion_id")["verdict"]
    assert (mine == ck.labels_.reindex(mine.index)).all()


def write_labels(path: Path, labels: pd.DataFrame) -> Path:
    full = labels.copy()
    for c in LABEL_COLUMNS:
        if c not in full.columns:
            full[c] = None
    write_jsonl(path, frame_records(full[LABEL_COLUMNS + [c for c in full.columns if c not in LABEL_COLUMNS]]))
    return path


def cli_json(capsys, *args) -> dict:
    assert main(list(args) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------------------------------
# crowd-kit reference


@pytest.mark.parametrize("method", ["dawid-skene", "one-coin"])
def test_equals_crowdkit_on_xsumfaith_annotators(method):
    labels = xsum_labels()
    res = memjudge.panel(labels, method=method, B=0)
    assert res.judges == ["wid_0", "wid_1", "wid_2"] and res.n_items == labels["assertion_id"].nunique()
    assert_equals_crowdkit(res, labels, method)


def test_cli_equals_crowdkit_on_imported_xsumfaith_with_partial_panels(tmp_path, capsys):
    """Through `memjudge import xsumfaith` and the CLI; two summaries have only two annotators
    and two have a null answer: those items use the judges they have."""
    assert main(["import", "xsumfaith", str(TEST_DATA / "xsumfaith_sample"), "--out", str(tmp_path / "x")]) == 0
    capsys.readouterr()
    out = tmp_path / "run" / "panel.jsonl"
    data = cli_json(capsys, "panel", str(tmp_path / "x" / "labels.jsonl"), "--out", str(out), "--bootstrap", "200")
    assert {"method", "judges", "n_items", "iterations", "prior", "judge_errors"} <= set(data)
    assert json.loads((out.parent / "panel.json").read_text()) == data
    panel_labels = read_labels(out)
    assert list(panel_labels.columns[:len(LABEL_COLUMNS)]) == LABEL_COLUMNS
    assert set(panel_labels["judge"]) == {"panel:dawid-skene(wid_0+wid_1+wid_2)"}
    src = read_labels(tmp_path / "x" / "labels.jsonl")
    valid = src[src["verdict"].notna()]
    counts = valid.groupby("assertion_id").size()
    assert (counts < 3).any()  # partial panels are really there
    ck = crowd_fit(valid, "dawid-skene")
    got = panel_labels.set_index("assertion_id")
    answered = got[got["verdict"].notna()]
    np.testing.assert_allclose(answered["judge_score"].to_numpy(float),
                               ck.probas_["supported"].reindex(answered.index).to_numpy(float), atol=TOL)
    # an item no judge answered stays, with a null verdict and the reason
    unanswered = set(src["assertion_id"]) - set(valid["assertion_id"])
    for aid in unanswered:
        assert got.loc[aid, "verdict"] is None and "no judge" in got.loc[aid, "error"]
    assert data["iterations"] == len(ck.loss_history_)


@pytest.mark.parametrize("method", ["dawid-skene", "one-coin"])
@pytest.mark.parametrize("seed,classes", [(1, ("supported", "unsupported")), (2, ("supported", "unsupported")),
                                          (3, ("supported", "unsupported", "partial"))])
def test_equals_crowdkit_on_simulated_panels(method, seed, classes):
    labels = ds_labels(seed, classes=classes)
    res = memjudge.panel(labels, method=method, B=0)
    assert sorted(res.classes) == sorted(classes)
    assert_equals_crowdkit(res, labels, method)


def test_a_bootstrap_resample_is_an_em_on_the_resampled_data():
    """Item weights of a persona-cluster resample equal copies of the items: the batched EM
    of one resample matches crowd-kit on the explicitly resampled data set."""
    from memjudge.stats.bootstrap import cluster_weights
    from memjudge.stats.panel import fit_em, responses

    labels = ds_labels(5, n=300)
    rs = responses(labels)
    personas = pd.Index(sorted(rs.items["persona_id"].unique()))
    cluster = personas.get_indexer(rs.items["persona_id"])
    W = cluster_weights(len(personas), 3, seed=7)
    fit = fit_em(rs.one_hot, "dawid-skene", W[:, cluster])
    by_p = dict(tuple(labels.groupby("persona_id")))
    for b in range(3):
        parts = []
        for k, c in enumerate(W[b].astype(int)):
            for copy in range(c):
                g = by_p[personas[k]]
                parts.append(g.assign(assertion_id=g["assertion_id"] + f"#{copy}"))
        ck = crowd_fit(pd.concat(parts, ignore_index=True), "dawid-skene")
        assert fit.iterations[b] == len(ck.loss_history_)
        for k, c in enumerate(rs.classes):
            assert fit.prior[b, k] == pytest.approx(ck.priors_[c], abs=TOL)
        for j, judge in enumerate(rs.judges):
            for k, said in enumerate(rs.classes):
                for c, true in enumerate(rs.classes):
                    assert fit.e[b, j, k, c] == pytest.approx(ck.errors_.loc[(judge, said), true], abs=TOL)


# ---------------------------------------------------------------------------------------
# majority vote, by hand


def test_majority_vote_hand_made_case(tmp_path, capsys):
    rows = [
        ("i1", "A", "supported"), ("i1", "B", "supported"), ("i1", "C", "unsupported"),  # 2-1: supported, 2/3
        ("i2", "A", "supported"), ("i2", "B", "unsupported"),  # 1-1 with C absent: tie, null
        ("i3", "A", "unsupported"), ("i3", "B", "unsupported"), ("i3", "C", None),  # C null: 2-0 unsupported
        ("i4", "A", None), ("i4", "B", None), ("i4", "C", None),  # nobody: null
        ("i5", "A", "supported"), ("i5", "B", "partial"), ("i5", "C", "unsupported"),  # 1-1-1 tie
        ("i6", "A", "partial"), ("i6", "B", "partial"), ("i6", "C", "supported"),  # partial, 1/3 supported
    ]
    labels = pd.DataFrame(rows, columns=["assertion_id", "judge", "verdict"]).assign(
        persona_id=lambda d: d["assertion_id"], category="c", rubric="support", replicate=0)
    path = write_labels(tmp_path / "labels.jsonl", labels)
    out = tmp_path / "mv.jsonl"
    data = cli_json(capsys, "panel", str(path), "--method", "majority", "--out", str(out))
    got = read_labels(out).set_index("assertion_id")
    assert got["judge"].iloc[0] == "panel:majority(A+B+C)"
    want = {"i1": ("supported", 2 / 3), "i2": (None, 0.5), "i3": ("unsupported", 0.0), "i4": (None, None),
            "i5": (None, 1 / 3), "i6": ("partial", 1 / 3)}
    for aid, (verdict, share) in want.items():
        assert got.loc[aid, "verdict"] == verdict, aid
        if share is None:
            assert pd.isna(got.loc[aid, "judge_score"])
        else:
            assert got.loc[aid, "judge_score"] == pytest.approx(share)
    assert "tie" in got.loc["i2", "error"] and "tie" in got.loc["i5", "error"]
    assert got.loc["i1", "error"] is None
    assert data["iterations"] == 0 and data["verdicts"] == {"supported": 1, "unsupported": 1, "partial": 1, "null": 3}


# ---------------------------------------------------------------------------------------
# simulation: recovery of declared error rates and accuracy (paper preset)

DECLARED = {"sim:lenient": (0.97, 0.70), "sim:balanced": (0.92, 0.88), "sim:strict": (0.85, 0.93)}


def sim_panel(tmp: Path, personas: int, replicates: int = 1) -> tuple[Path, Path]:
    from memjudge.judges import make_judge
    from memjudge.simulation import simulate

    corpus = simulate("paper", seed=0, personas=personas, out=tmp)
    frames = [make_judge(spec, options={"truth": str(tmp), "seed": i + 1, "sensitivity": se, "specificity": sp,
                                        "leniency": 1 - sp, "strictness": 0.0, "flip_rate": 0.0})
              .labels(corpus.candidates, replicates=replicates)
              for i, (spec, (se, sp)) in enumerate(DECLARED.items())]
    path = tmp / "judges.jsonl"
    write_jsonl(path, frame_records(pd.concat(frames, ignore_index=True)))
    return path, tmp / "labels.jsonl"


@pytest.fixture(scope="module")
def big_sim(tmp_path_factory):
    return sim_panel(tmp_path_factory.mktemp("sim400"), personas=400)


def test_dawid_skene_recovers_declared_error_rates_and_beats_the_best_judge(big_sim, tmp_path, capsys):
    judges, gold = big_sim
    data = cli_json(capsys, "panel", str(judges), "--gold", str(gold), "--out", str(tmp_path / "p.jsonl"))
    assert data["simulated"] is True
    for r in data["judge_errors"]:
        sens, spec = DECLARED[r["judge"]]
        assert abs(r["sensitivity"]["value"] - sens) <= 0.03, r
        assert abs(r["specificity"]["value"] - spec) <= 0.03, r
        # and against what the sample's gold labels measure
        assert abs(r["sensitivity"]["value"] - r["gold_sensitivity"]["value"]) <= 0.03
        assert abs(r["specificity"]["value"] - r["gold_specificity"]["value"]) <= 0.03
        for m in ("sensitivity", "specificity", "gold_sensitivity", "gold_specificity"):
            assert r[m]["lo"] <= r[m]["value"] <= r[m]["hi"]
    acc = {k: v["value"] for k, v in data["gold"]["accuracy"].items()}
    panel_name = data["judge"]
    assert acc[panel_name] >= max(v for k, v in acc.items() if k != panel_name)


def test_gold_measured_rates_equal_scikit_learn(big_sim, tmp_path):
    from sklearn.metrics import accuracy_score, recall_score

    judges, gold = big_sim
    res = memjudge.panel(judges, gold=gold, B=50)
    lab, g = read_labels(judges), read_labels(gold).set_index("assertion_id")["verdict"]
    for r in res.judge_errors:
        v = lab[lab["judge"] == r["judge"]].set_index("assertion_id")["verdict"]
        y_true, y_pred = g.reindex(v.index) == "supported", v == "supported"
        assert r["gold_sensitivity"]["value"] == pytest.approx(recall_score(y_true, y_pred))
        assert r["gold_specificity"]["value"] == pytest.approx(recall_score(~y_true, ~y_pred))
        assert res.gold["accuracy"][r["judge"]]["value"] == pytest.approx(accuracy_score(g.reindex(v.index), v))


def test_by_category_is_a_separate_fit_per_category(big_sim, capsys, tmp_path):
    judges, _ = big_sim
    data = cli_json(capsys, "panel", str(judges), "--by", "category", "--bootstrap", "100",
                    "--out", str(tmp_path / "p.jsonl"))
    lab = read_labels(judges)
    cats = {c["category"]: c for c in data["by_category"]}
    assert set(cats) == set(lab["category"])
    values = lab[lab["category"] == "values"]
    ck = crowd_fit(values, "dawid-skene")
    for r in cats["values"]["judge_errors"]:
        assert r["sensitivity"]["value"] == pytest.approx(ck.errors_.loc[(r["judge"], "supported"), "supported"], abs=TOL)
        assert r["sensitivity"]["lo"] <= r["sensitivity"]["value"] <= r["sensitivity"]["hi"]
    # the consensus labels do not depend on --by
    plain = memjudge.panel(judges, B=0)
    by = read_labels(tmp_path / "p.jsonl")
    assert (by["verdict"].to_numpy() == plain.labels["verdict"].to_numpy()).all()


# ---------------------------------------------------------------------------------------
# the panel is a judge like any other


@pytest.fixture(scope="module")
def small_sim(tmp_path_factory):
    return sim_panel(tmp_path_factory.mktemp("sim30"), personas=30, replicates=2)


def test_panel_file_plugs_into_agreement_robustness_noise_and_report(small_sim, tmp_path, capsys):
    judges, gold = small_sim
    corpus = judges.parent
    run = tmp_path / "run"
    panel_file = run / "panel.jsonl"
    pdata = cli_json(capsys, "panel", str(judges), "--replicate", "majority", "--gold", str(gold),
                     "--bootstrap", "200", "--out", str(panel_file))
    name = pdata["judge"]
    agr = cli_json(capsys, "agreement", str(judges), str(panel_file), "--gold", str(gold), "--bootstrap", "50",
                   "--out", str(run))
    assert name in agr["judges"]
    assert any(g["judge"] == name for g in agr["gold"])
    rob = cli_json(capsys, "robustness", str(corpus / "candidates.jsonl"), "--labels", str(judges), str(panel_file),
                   "--repeats", "2", "--out", str(run))
    assert name in json.dumps(rob)
    cmp_ = cli_json(capsys, "compare", str(corpus / "candidates.jsonl"), "--labels", str(panel_file),
                    "--repeats", "2")
    assert name in json.dumps(cmp_)
    assert main(["noise", str(panel_file), "--bootstrap", "20"]) == 0
    capsys.readouterr()
    assert main(["report", str(run)]) == 0
    capsys.readouterr()
    md = (run / "report.md").read_text()
    assert "## Judge panel" in md and "fig_panel_errors.png" in md and (run / "fig_panel_errors.png").is_file()
    for r in pdata["judge_errors"]:
        assert f"{r['sensitivity']['value']:.3f}" in md


def test_report_names_the_command_when_panel_json_is_absent(small_sim, tmp_path, capsys):
    judges, _ = small_sim
    run = tmp_path / "run"
    assert main(["agreement", str(judges), "--bootstrap", "20", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["report", str(run), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "panel" in out["absent"]
    assert "memjudge panel LABELS... --out RUN_DIR/panel.jsonl" in (run / "report.md").read_text()


# ---------------------------------------------------------------------------------------
# bad input: one line, exit 2


def _bad(tmp_path, capsys, labels: pd.DataFrame, *extra) -> str:
    path = write_labels(tmp_path / "labels.jsonl", labels)
    code = main(["panel", str(path), "--out", str(tmp_path / "p.jsonl"), *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "p.jsonl").exists()
    return err


def test_one_judge_only(tmp_path, capsys):
    labels = xsum_labels()
    err = _bad(tmp_path, capsys, labels[labels["judge"] == "wid_0"])
    assert "at least 2 judges" in err and "wid_0" in err
    err = _bad(tmp_path, capsys, xsum_labels(), "--judges", "wid_1")
    assert "at least 2 judges" in err


def test_judges_with_no_common_items(tmp_path, capsys):
    labels = xsum_labels()
    items = sorted(labels["assertion_id"].unique())
    a = labels[(labels["judge"] == "wid_0") & labels["assertion_id"].isin(items[:100])]
    b = labels[(labels["judge"] == "wid_1") & labels["assertion_id"].isin(items[100:])]
    err = _bad(tmp_path, capsys, pd.concat([a, b]))
    assert "shares no item" in err


def test_label_outside_the_declared_set_names_file_and_line(tmp_path, capsys):
    labels = xsum_labels().reset_index(drop=True)
    labels.loc[6, "verdict"] = "maybe"
    err = _bad(tmp_path, capsys, labels)
    assert f"{tmp_path / 'labels.jsonl'}:7:" in err and "'maybe'" in err and "supported, unsupported, partial" in err


def test_unknown_judge_and_bad_out(tmp_path, capsys):
    err = _bad(tmp_path, capsys, xsum_labels(), "--judges", "wid_0,nobody")
    assert "nobody" in err
    path = write_labels(tmp_path / "l.jsonl", xsum_labels())
    assert main(["panel", str(path), "--out", str(tmp_path / "p.txt")]) == 2
    assert "--out must be a labels file" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# full XSumFaith (shared data)


@pytest.mark.shared_data
def test_equals_crowdkit_on_full_xsumfaith(shared_data):
    labels = xsum_labels(shared_data / "xsumfaith" / "factuality_annotations_xsum_summaries.csv")
    for method in ("dawid-skene", "one-coin"):
        res = memjudge.panel(labels, method=method, B=0)
        assert_equals_crowdkit(res, labels, method)


# ---------------------------------------------------------------------------------------
# the figure


def _errors_frame(gold: bool) -> pd.DataFrame:
    rows = []
    for j, (se, sp) in DECLARED.items():
        for m, v in (("sensitivity", se), ("specificity", sp)):
            rows.append({"judge": j, "measure": m, "value": v, "lo": v - 0.02, "hi": min(1.0, v + 0.02),
                         "gold": v + 0.01 if gold else np.nan, "gold_lo": v - 0.01 if gold else np.nan,
                         "gold_hi": min(1.0, v + 0.03) if gold else np.nan})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("gold", [True, False])
def test_panel_figure_draws_estimates_against_gold(gold, tmp_path):
    from memjudge.reporting import figures as F
    from test_figures import png_size

    frame = _errors_frame(gold)
    fig = F.panel_error_rates(frame)
    data = F.save_png(fig, tmp_path / "f.png", dpi=100).read_bytes()
    assert png_size(data) == (650, 340) and len(data) > 5_000
    for ax, m in zip(fig.axes[:2], ("sensitivity", "specificity")):
        d = frame[frame["measure"] == m]
        pts = sorted((float(c.lines[0].get_xdata()[0]), float(c.lines[0].get_ydata()[0])) for c in ax.containers)
        want = sorted(zip(d["gold"], d["value"])) if gold else sorted(zip(d["value"], np.arange(len(d))[::-1]))
        np.testing.assert_allclose(pts, want)
        assert m in ax.get_xlabel()


def test_panel_figure_without_data_is_a_placeholder():
    from memjudge.reporting import figures as F

    fig = F.panel_error_rates(_errors_frame(True).iloc[0:0])
    assert any("no " in t.get_text() for ax in fig.axes for t in ax.texts)


# ---------------------------------------------------------------------------------------
# interval coverage by simulation


def test_bootstrap_intervals_cover_the_declared_rates():
    """Panels drawn straight from a binary Dawid–Skene model with persona-clustered items: the
    95% persona-cluster intervals cover the declared rates about 95% of the time (bench/panel.py
    runs 200 repetitions; here 60, with a loose bound)."""
    rng = np.random.default_rng(11)
    reps, personas, per = 60, 60, 20
    n = personas * per
    hits = []
    for r in range(reps):
        z = rng.random(n) < 0.8
        frames = []
        for name, (se, sp) in DECLARED.items():
            says = np.where(z, rng.random(n) < se, rng.random(n) >= sp)
            frames.append(pd.DataFrame({"assertion_id": [f"a{i}" for i in range(n)],
                                        "persona_id": [f"p{i // per}" for i in range(n)], "category": "c",
                                        "judge": name, "rubric": "support", "replicate": 0,
                                        "verdict": np.where(says, "supported", "unsupported")}))
        res = memjudge.panel(pd.concat(frames, ignore_index=True), B=300, seed=r)
        hits.append([row[m]["lo"] <= DECLARED[row["judge"]][k] <= row[m]["hi"]
                     for row in res.judge_errors for k, m in enumerate(("sensitivity", "specificity"))])
    coverage = np.mean(hits, axis=0)
    assert coverage.mean() >= 0.88, coverage
    assert coverage.min() >= 0.8, coverage


def test_gold_with_several_annotators_uses_their_majority(tmp_path):
    labels = xsum_labels()
    items = sorted(labels["assertion_id"].unique())[:3]
    gold = pd.DataFrame({"assertion_id": [items[0]] * 3 + [items[1]] * 2 + [items[2]],
                         "annotator": ["x", "y", "z", "x", "y", "x"],
                         "verdict": ["supported", "supported", "unsupported", "supported", "unsupported", "unsupported"]})
    res = memjudge.panel(labels, gold=gold, B=0)
    assert res.gold["n_items"] == 2  # items[1]'s annotators tie
    assert any("tie" in n for n in res.notes)
