"""The report's "Judge-corrected estimates" section: read from estimate.json and compare.json's
gold block (never recomputed), drawn as a forest plot (tested on the plotted data), named as
absent with its command when estimate.json is missing. The run is made through the CLI:
simulate → sim judge → sample → (hand labels = the corpus's truth) → estimate, compare --gold."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from memjudge.reporting import report
from memjudge.reporting.frames import estimate_frame
from memjudge.reporting.reader import load_run


@pytest.fixture(scope="module")
def made(tmp_path_factory, request):
    from conftest import run_cli as cli
    from memjudge.formats import frame_records, write_jsonl
    from memjudge.judges import make_judge
    from memjudge.simulation import simulate

    d = tmp_path_factory.mktemp("ppi_run")
    c = simulate(preset="paper", seed=1, personas=30)
    paths = c.write(d / "corpus")
    lab = make_judge("sim:strict", options={"truth": str(d / "corpus"), "seed": 0}).labels(c.candidates)
    write_jsonl(d / "labels.jsonl", frame_records(lab))
    r = cli("sample", paths["candidates"], "--n", "150", "--seed", "0", "--out", d / "to_label.jsonl")
    assert r.returncode == 0, r.stderr
    # the "hand labels": the corpus's construction truth on the sampled rows
    s = pd.read_json(d / "to_label.jsonl", lines=True, dtype={"assertion_id": str})
    s["verdict"] = c.labels.set_index("assertion_id")["verdict"].reindex(s["assertion_id"]).to_numpy()
    write_jsonl(d / "corpus" / "gold.jsonl", frame_records(s))
    run = d / "run"
    r = cli("estimate", d / "labels.jsonl", "--gold", d / "corpus" / "gold.jsonl", "--by", "category",
            "--bootstrap", "300", "--out", run)
    assert r.returncode == 0, r.stderr
    r = cli("compare", paths["candidates"], "--labels", d / "labels.jsonl", "--coverage", paths["coverage"],
            "--gold", d / "corpus" / "gold.jsonl", "--repeats", "4", "--out", run)
    assert r.returncode == 0, r.stderr
    return run


@pytest.fixture
def run(made, tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(made, dst)
    return dst


def load(run, name):
    return json.loads((run / name).read_text())


def test_forest_frame_and_plot_are_estimate_json(run, cli):
    r = cli("report", run)
    assert r.returncode == 0, r.stderr
    est = load(run, "estimate.json")
    frame = estimate_frame(load_run(run))
    assert list(dict.fromkeys(frame["group"])) == [g["group"] for g in est["groups"]]
    for g in est["groups"]:
        for m in ("judge_only", "gold_only", "ppi"):
            row = frame[(frame["group"] == g["group"]) & (frame["method"] == m)].iloc[0]
            for k in ("value", "lo", "hi"):
                assert (np.isnan(row[k]) and g[m][k] is None) or row[k] == g[m][k]
            assert row["effective_gold_n"] == pytest.approx(g["effective_gold_n"]) if g["effective_gold_n"] is not None \
                else np.isnan(row["effective_gold_n"])
    # the plotted points and interval ends are those numbers, in percent, one series per method
    from memjudge.reporting import figures as F

    fig = F.ppi_forest(frame)
    ax = fig.axes[0]
    assert len(ax.containers) == 3
    groups = list(dict.fromkeys(frame["group"]))
    for cont, m in zip(ax.containers, ("judge_only", "gold_only", "ppi")):
        data_line, _caps, (bars,) = cont.lines
        x, y = data_line.get_xdata(), data_line.get_ydata()
        sub = frame[frame["method"] == m].set_index("group").reindex(groups)
        ok = sub["value"].notna().to_numpy()
        assert np.allclose(x, 100 * sub["value"].to_numpy()[ok])
        # rows one above the other: within a group judge-only on top, PPI++ at the bottom
        off = {"judge_only": 0.22, "gold_only": 0.0, "ppi": -0.22}[m]
        assert np.allclose(y, (len(groups) - 1 - np.arange(len(groups)) + off)[ok])
        segs = bars.get_segments()
        assert np.allclose([s[0][0] for s in segs], 100 * sub["lo"].to_numpy()[ok])
        assert np.allclose([s[1][0] for s in segs], 100 * sub["hi"].to_numpy()[ok])
    assert ax.get_legend_handles_labels()[1] == ["Judge only", "Gold only", "PPI++ (gold + judge)"]
    png = run / "fig_ppi_forest.png"
    w = int.from_bytes(png.read_bytes()[16:20], "big")
    assert w == 1300  # 6.5 in at 200 dpi, as every figure of the report


def test_section_reads_the_json(run):
    est = load(run, "estimate.json")
    cmp_ = load(run, "compare.json")
    # edit the JSON: the report must show the edited numbers, because it never recomputes them
    est["groups"][0]["ppi"]["value"] = 0.912345
    (run / "estimate.json").write_text(json.dumps(est))
    report(run, formats="md", dpi=40)
    md = (run / "report.md").read_text()
    sec = md[md.index("## Judge-corrected estimates"):]
    sec = sec[:sec.index("\n## ", 5)]
    assert "Simulated gold" in sec  # the gold file sits beside the simulated corpus
    top = est["groups"][0]
    assert top["group"] == "all"
    assert f"| all | {top['n_items']:,} | {top['n_gold']} |" in sec
    assert "91.23 [" in sec
    s = (f"all items: the judge says {100 * top['judge_only']['value']:.2f}% supported; corrected with "
         f"{top['n_gold']} simulated gold labels: 91.23 [{100 * top['ppi']['lo']:.2f}, {100 * top['ppi']['hi']:.2f}]%")
    assert s in sec
    assert f"as precise as {round(top['effective_gold_n'])} gold labels alone" in sec
    assert "](fig_ppi_forest.png)" in sec
    # the policy ordering under PPI++ (compare.json's gold block)
    from memjudge.comparison.gold import ordering_sentence

    sent = ordering_sentence(cmp_["gold"]["ordering"], cmp_["gold"]["paired"]["ppi"])
    assert sent.split(":")[0] in sec
    # Table 1 gains the PPI++ column: fold mean ± SD from compare.json's gold block
    t1 = md[md.index("**Table 1."):]
    head = t1.splitlines()[2]
    assert "Faithfulness, PPI++ (%)" in head
    col = [c.strip() for c in head.strip("|").split("|")].index("Faithfulness, PPI++ (%)")
    cells = {}
    for line in t1.splitlines()[4:]:
        if not line.startswith("|"):
            break
        parts = [c.strip() for c in line.strip("|").split("|")]
        cells[parts[0]] = parts[col]
    g = cmp_["gold"]["policies"]["global"]["ppi"]
    assert cells["Global threshold"] == f"{100 * g['value']:.2f} ± {100 * g['sd']:.2f}"
    assert cells["Write-all (full sample)"] == f"{100 * cmp_['gold']['write_all']['ppi']:.2f}"
    p = cmp_["gold"]["paired"]["ppi"]
    assert cells["Targeted − global (paired)"] == f"{100 * p['value']:+.2f} [{100 * p['lo']:+.2f}, {100 * p['hi']:+.2f}]"


def test_robustness_gold_summary_sentence(run):
    rob = {"gate": ["values"], "units": [], "summary": {
        "judges": 3, "units": 3, "faithfulness_ppi": {"judges": 2, "units": 2, "judges_defined": 3, "units_defined": 3,
                                                      "survives_judges": 1, "survives_units": 1}}}
    (run / "robustness.json").write_text(json.dumps(rob))
    report(run, formats="md", dpi=40)
    md = (run / "report.md").read_text()
    assert ("PPI++ puts targeted ≥ global on held-out faithfulness under 2 of 3 judges' labels; each judge's own "
            "ordering survives the correction for 1 of 3 judges") in md


def test_missing_estimate_names_its_command(run):
    (run / "estimate.json").unlink()
    res = report(run, formats="md", dpi=40)
    assert "estimate" in res.absent
    md = (run / "report.md").read_text()
    assert "estimate.json is absent: memjudge estimate LABELS --gold GOLD" in md
    assert "fig_ppi_forest.png" not in md
    # without compare --gold either, the section is left out; the absent part is still named
    cmp_ = load(run, "compare.json")
    del cmp_["gold"]
    (run / "compare.json").write_text(json.dumps(cmp_))
    report(run, formats="md", dpi=40)
    md = (run / "report.md").read_text()
    assert "## Judge-corrected estimates" not in md and "Faithfulness, PPI++" not in md
    assert "estimate.json (memjudge estimate LABELS --gold GOLD" in md


def test_bad_estimate_json_is_one_line(run, cli):
    (run / "estimate.json").write_text(json.dumps({"groups": {"all": 1}}))
    r = cli("report", run)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "estimate.json" in r.stderr
