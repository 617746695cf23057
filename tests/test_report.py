"""`memjudge report`: every number in the report is the one in the run's JSON, the HTML is
self-contained, missing parts are reported as absent, bad input is one line and exit 2, and
the findings' wording follows the direction of each result."""

from __future__ import annotations

import json
import re
import shutil
import struct
from pathlib import Path

import pytest

from memjudge.reporting import report

FIXTURE = Path(__file__).parent / "data" / "report_run"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DPI = 80  # small figures keep the tests fast; the CLI writes 200 dpi


@pytest.fixture
def run(tmp_path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(FIXTURE, d)
    return d


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """The fixture run, reported once for the tests that only read the result."""
    d = tmp_path_factory.mktemp("rendered") / "run"
    shutil.copytree(FIXTURE, d)
    report(d, dpi=DPI)
    return d


def load(run: Path, name: str) -> dict:
    return json.loads((run / name).read_text())


def save(run: Path, name: str, obj) -> None:
    (run / name).write_text(json.dumps(obj))


def md_table(md: str, caption_start: str) -> list[list[str]]:
    """Rows (cells, header excluded) of the Markdown table whose bold caption starts so."""
    lines = md.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("**" + caption_start))
    k = i + 1
    while not lines[k].startswith("|"):
        k += 1
    rows = []
    for ln in lines[k + 2:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip().replace("\\|", "|") for c in ln.strip()[1:-1].split(" | ")])
    return rows


def nums(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"[-+]?\d+(?:\.\d+)?", cell.replace(",", ""))]


def p2(x: float) -> float:
    return round(100 * x, 2)


# ---------------------------------------------------------------------------------------


def test_cli_writes_markdown_html_and_every_figure(run, cli):
    r = cli("report", str(run))
    assert r.returncode == 0, r.stderr
    for name in ("report.md", "report.html"):
        assert (run / name).stat().st_size > 1000
    pngs = sorted(run.glob("fig_*.png"))
    assert {p.name for p in pngs} == {"fig_support_by_category.png", "fig_faithfulness_vs_coverage.png",
                                      "fig_calibration.png", "fig_flip_rate.png", "fig_agreement.png",
                                      "fig_fold_differences.png"}
    for p in pngs:
        data = p.read_bytes()
        assert data[:8] == PNG_SIGNATURE and len(data) > 5_000
        w, h = struct.unpack(">II", data[16:24])
        assert w == 1300 and 700 <= h <= 950, (p.name, w, h)  # 6.5 in wide at 200 dpi
    assert "coverage" in r.stderr  # the one absent part is named
    md = (run / "report.md").read_text()
    for p in pngs:
        assert f"]({p.name})" in md


def test_table1_equals_compare_json(rendered):
    run = rendered
    md = (run / "report.md").read_text()
    c = load(run, "compare.json")
    rows = {r[0]: r for r in md_table(md, "Table 1.")}
    assert list(rows) == ["Write-all (full sample)", "Global threshold", "Targeted (values)",
                          "Global threshold − write-all (paired)", "Targeted − write-all (paired)",
                          "Targeted − global (paired)"]
    wa = rows["Write-all (full sample)"]
    assert [nums(wa[i])[0] for i in (1, 2, 3)] == [p2(c["write_all"][m]) for m in ("faithfulness", "retention", "coverage")]
    for col, m in ((1, "faithfulness"), (3, "coverage")):  # write-all with its bootstrap interval
        ci = c["write_all_ci"][m]
        assert nums(wa[col]) == [p2(ci["value"]), p2(ci["lo"]), p2(ci["hi"])]
    for label, name in (("Global threshold − write-all (paired)", "global"), ("Targeted − write-all (paired)", "targeted")):
        for col, m in ((1, "faithfulness"), (2, "retention"), (3, "coverage")):
            ch = c["paired_vs_write_all"][name][m]
            assert nums(rows[label][col]) == [p2(ch["value"]), p2(ch["lo"]), p2(ch["hi"])]
    t1_notes = md.split("**Table 1.", 1)[1].split("\n\n*", 1)[1].split("*\n", 1)[0]
    ch = c["paired_vs_write_all"]["targeted"]
    assert (f"targeted: faithfulness {ch['faithfulness']['same_sign']}/20, retention {ch['retention']['same_sign']}/20, "
            f"estimated coverage {ch['coverage']['same_sign']}/20") in t1_notes
    assert "95% persona-cluster bootstrap interval" in t1_notes
    for label, name in (("Global threshold", "global"), ("Targeted (values)", "targeted")):
        row, pol = rows[label], c["policies"][name]
        assert nums(row[1]) == [p2(pol["faithfulness"]["value"]), p2(pol["faithfulness"]["sd"])]
        assert nums(row[2]) == [p2(pol["retention"]["value"]), p2(pol["retention"]["sd"])]
        assert nums(row[3]) == [p2(pol["coverage"]["value"]), p2(pol["coverage"]["sd"])]
        assert nums(row[4]) == [p2(pol["delta_faithfulness"])]
        assert nums(row[5]) == [p2(pol["delta_coverage"])]
        assert " ± " in row[1] and row[4].startswith(("+", "-"))
    paired = rows["Targeted − global (paired)"]
    for col, m in ((1, "faithfulness"), (2, "retention"), (3, "coverage")):
        p = c["paired"][m]
        assert nums(paired[col]) == [p2(p["value"]), p2(p["lo"]), p2(p["hi"])]
    caption = next(ln for ln in md.splitlines() if ln.startswith("**Table 1."))
    assert "gemini:gemini-2.5-pro" in caption and "seed 0" in caption and "floor 80%" in caption
    assert f"{c['repeats']} × {c['folds']}-fold" in caption


def test_noise_and_agreement_tables_equal_json(rendered):
    run = rendered
    md = (run / "report.md").read_text()
    noise = load(run, "noise.json")
    rows = md_table(md, "Judge re-score noise.")
    assert len(rows) == len(noise["judges"])
    for row, j in zip(rows, noise["judges"]):
        assert row[0].startswith(j["judge"])
        assert nums(row[2]) == [j["items"]] and nums(row[4]) == [j["excluded_null"]]
        fr = j["flip_rate"]
        assert nums(row[5]) == [p2(fr["value"]), p2(fr["lo"]), p2(fr["hi"])]
    by_cat = md_table(md, "Flip rate by category")
    values = next(r for r in by_cat if r[0] == "values")
    for cell, j in zip(values[1:], noise["judges"]):
        d = j["by_category"]["values"]
        fr = d["flip_rate"]
        assert nums(cell) == [p2(fr["value"]), p2(fr["lo"]), p2(fr["hi"]), d["items"]]

    agr = load(run, "agreement.json")
    rows = md_table(md, "Agreement between judges")
    for row, p in zip(rows, agr["pairs"]):
        pa, ck, ac = p["percent_agreement"], p["cohen_kappa"], p["gwet_ac1"]
        assert nums(row[3]) == [p2(pa["value"]), p2(pa["lo"]), p2(pa["hi"])]
        assert nums(row[4]) == [round(ck[k], 3) for k in ("value", "lo", "hi")]
        assert nums(row[5]) == [round(ac[k], 3) for k in ("value", "lo", "hi")]
    assert f"Krippendorff's α (nominal, all judges): {agr['krippendorff_alpha']['value']:.3f}" in md
    assert f"Fleiss' κ (items every judge labelled): {agr['fleiss_kappa']['value']:.3f}" in md
    gold = md_table(md, "Judges against gold labels")
    assert nums(gold[0][2]) == [p2(agr["gold"][0]["accuracy"]["value"])]


def test_robustness_and_calibration_tables_equal_json(rendered):
    run = rendered
    md = (run / "report.md").read_text()
    rob = load(run, "robustness.json")
    rows = {r[0]: r for r in md_table(md, "Support by category")}
    for k, u in enumerate(rob["units"]):
        for d in u["categories"]:
            assert nums(rows[d["category"]][1 + k]) == [p2(d["support_rate"]), p2(d["lo"]), p2(d["hi"])]
        o = u["overall"]
        assert nums(rows["Overall (all categories)"][1 + k]) == [p2(o["value"]), p2(o["lo"]), p2(o["hi"])]
    rows = md_table(md, "Robustness across judges")
    for row, u in zip(rows, rob["units"]):
        pol, pf = u["table"]["policies"], u["table"]["paired"]["faithfulness"]
        assert row[0].startswith(u["judge"]) and row[2] == ", ".join(u["gated"])
        assert nums(row[3]) == [u["p_gated_lowest"]]
        assert nums(row[4]) == [p2(pol["global"]["faithfulness"]["value"]), p2(pol["targeted"]["faithfulness"]["value"])]
        assert nums(row[5]) == [p2(pf["value"]), p2(pf["lo"]), p2(pf["hi"])]
        holds = pol["targeted"]["faithfulness"]["value"] >= pol["global"]["faithfulness"]["value"]
        assert row[7] == ("yes" if holds else "no")
    tau = md_table(md, "Kendall's τ-b")
    assert [nums(r[2])[0] for r in tau] == [k["tau"] for k in rob["kendall"]]
    cal = load(run, "calibration.json")
    rows = md_table(md, "Calibration of the values category")
    vals = next(c for c in cal["categories"] if c["category"] == "values")["bins"]
    assert [nums(r[1])[0] for r in rows] == [b["n"] for b in vals]
    assert [nums(r[2]) for r in rows] == [[p2(b["support_rate"]), p2(b["ci_lo"]), p2(b["ci_hi"])] for b in vals]


def test_html_is_self_contained_and_escapes_data(run):
    noise = load(run, "noise.json")
    noise["judges"][0]["judge"] = "openai:<script>alert(1)</script>"
    save(run, "noise.json", noise)
    res = report(run, dpi=DPI)
    html = (run / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(res.figures) == 6
    assert not re.search(r'src="(?!data:)', html) and "http" not in html and "<link" not in html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    md = (run / "report.md").read_text()
    assert "<script>" not in md


def test_missing_parts_are_named_and_the_rest_reported(run):
    for name in ("compare.json", "compare_inputs.json", "sweep.json", "calibration.json", "robustness.json",
                 "agreement.json"):
        (run / name).unlink()
    res = report(run, dpi=DPI)
    assert set(res.present) == {"configuration", "labels", "noise"}
    assert {"compare", "robustness", "agreement", "coverage"} <= set(res.absent)
    assert [p.name for p in res.figures] == ["fig_flip_rate.png"]
    md = (run / "report.md").read_text()
    assert "Absent from this run: " in md and "compare.json (memjudge compare" in md
    assert "Table 1." not in md and "Judge re-score noise." in md


def test_run_with_only_compare_has_table1_and_its_figures(tmp_path):
    d = tmp_path / "only"
    d.mkdir()
    shutil.copy(FIXTURE / "compare.json", d)
    res = report(d, formats="md", dpi=DPI)
    assert res.html is None and not (d / "report.html").exists()
    assert {p.name for p in res.figures} == {"fig_faithfulness_vs_coverage.png", "fig_fold_differences.png"}
    assert "Table 1." in (d / "report.md").read_text()


def test_compare_without_coverage_plots_retention(run):
    c = load(run, "compare.json")
    c["write_all"]["coverage"] = None
    for pol in c["policies"].values():
        pol["coverage"] = None
        pol["delta_coverage"] = None
    c["paired"].pop("coverage")
    for f in c["folds_detail"]:
        f["coverage"] = None
    save(run, "compare.json", c)
    (run / "sweep.json").unlink()
    report(run, dpi=DPI)
    md = (run / "report.md").read_text()
    row = next(r for r in md_table(md, "Table 1.") if r[0] == "Global threshold")
    assert row[3] == "—" and row[5] == "—"
    assert "Faithfulness against retention (no coverage in this run)" in md


@pytest.mark.parametrize("setup, message", [
    (lambda d: None, "no memjudge results found"),
    (lambda d: d.rmdir(), "no such run directory"),
])
def test_empty_or_missing_run_dir_exits_2(tmp_path, cli, setup, message):
    d = tmp_path / "empty"
    d.mkdir()
    setup(d)
    r = cli("report", str(d))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and message in r.stderr and "Traceback" not in r.stderr


def test_malformed_json_exits_2_naming_the_file(run, cli):
    (run / "agreement.json").write_text('{"judges": [\n  "a",\n  oops\n]}')
    r = cli("report", str(run))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert str(run / "agreement.json") + ":3: not valid JSON" in r.stderr


def test_wrong_shape_exits_2_naming_the_file(run, cli):
    save(run, "compare.json", {"judge": "x", "policies": {"global": {"faithfulness": 0.9}}})
    r = cli("report", str(run))
    assert r.returncode == 2 and "compare.json" in r.stderr and "faithfulness" in r.stderr
    save(run, "compare.json", [1, 2])
    r = cli("report", str(run))
    assert r.returncode == 2 and "compare.json: expected a JSON object" in r.stderr


def test_unknown_format_is_a_usage_error(run, cli):
    r = cli("report", str(run), "--format", "pdf")
    assert r.returncode == 2 and "pdf" in r.stderr and r.stderr.count("\n") == 1


def test_cli_json_lists_paths_and_parts(run, cli):
    r = cli("report", str(run), "--format", "html", "--json", "--dpi", "50")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["markdown"] is None and out["html"].endswith("report.html")
    assert out["absent"] == ["coverage", "panel", "estimate"] and len(out["figures"]) == 6
    assert out["present"] == ["configuration", "labels", "noise", "agreement", "compare", "compare_inputs", "sweep",
                              "calibration", "robustness"]


def test_missing_optional_keys_give_n_a_not_a_crash(run):
    c = load(run, "compare.json")
    del c["paired"], c["folds_detail"], c["policies"]["global"]["retention"]
    c["policies"]["targeted"]["faithfulness"].pop("sd")
    save(run, "compare.json", c)
    rob = load(run, "robustness.json")
    for u in rob["units"]:
        u.pop("table"), u.pop("p_gated_lowest")
        for cat in u["categories"]:
            cat.pop("lo"), cat.pop("hi")
    rob.pop("summary"), rob.pop("kendall")
    save(run, "robustness.json", rob)
    noise = load(run, "noise.json")
    for j in noise["judges"]:
        j.pop("by_category"), j["flip_rate"].update(lo=None, hi=None)
    save(run, "noise.json", noise)
    agr = load(run, "agreement.json")
    for p in agr["pairs"]:
        for m in ("percent_agreement", "cohen_kappa", "gwet_ac1"):
            p[m].update(lo=None, hi=None)
    agr.pop("krippendorff_alpha"), agr.pop("gold")
    save(run, "agreement.json", agr)
    res = report(run, dpi=DPI)
    md = res.markdown.read_text()
    rows = {r[0]: r for r in md_table(md, "Table 1.")}
    assert rows["Global threshold"][2] == "—"
    assert nums(rows["Targeted (values)"][1]) == [p2(c["policies"]["targeted"]["faithfulness"]["value"])]
    assert "Targeted − global (paired)" not in rows
    assert "fig_fold_differences.png" not in {p.name for p in res.figures}
    rob_rows = md_table(md, "Robustness across judges")
    assert all(r[3] == "—" and r[5] == "—" and r[7] == "—" for r in rob_rows)
    assert nums(md_table(md, "Judge re-score noise.")[0][5]) == [p2(noise["judges"][0]["flip_rate"]["value"])]
    assert "Krippendorff" not in md.split("## Findings", 1)[1].split("\n## ", 1)[0]


# ---------------------------------------------------------------------------------------
# findings: templated from the JSON, worded by the direction of each result


def findings_of(run: Path) -> str:
    report(run, formats="md", dpi=DPI)
    md = (run / "report.md").read_text()
    return md.split("## Findings", 1)[1].split("\n## ", 1)[0]


def test_findings_state_the_results_in_the_json(rendered):
    run = rendered
    text = (run / "report.md").read_text().split("## Findings", 1)[1].split("\n## ", 1)[0]
    c = load(run, "compare.json")
    pf, pc = c["paired"]["faithfulness"], c["paired"]["coverage"]
    assert f"higher on faithfulness by {100 * pf['value']:.2f} points" in text
    assert f"higher on estimated coverage by {100 * pc['value']:.2f} points" in text
    assert f"same sign in {pf['same_sign']} of {c['repeats'] * c['folds']} folds" in text
    assert "lowest-support category is values at 77.90%" in text
    o = load(run, "robustness.json")["units"][0]["overall"]
    assert f"; overall support is {p2(o['value']):.2f}% (95% percentile interval, persona bootstrap: {p2(o['lo']):.2f}–{p2(o['hi']):.2f})." in text
    assert "That is the gated category (values)" in text
    assert "The lowest-support category is the gated one under every judge (3 of 3)" in text
    assert "flips 4.71% of its verdicts" in text
    g = load(run, "agreement.json")["gold"][0]
    acc, kappa, recall = (g[m]["value"] for m in ("accuracy", "cohen_kappa", "unsupported_recall"))
    assert (f"Against the gold labels: {g['judge']} is right on {100 * acc:.2f}% of {g['n']} items "
            f"(κ {kappa:.3f}, recall of unsupported {recall:.3f})") in text
    assert "The ordering targeted ≥ global holds on faithfulness under 2 of 3 judges (not under sim:strict (simulated))" in text
    assert "; holds on estimated coverage under every judge (3 of 3)." in text


def test_findings_read_correctly_when_the_result_goes_the_other_way(run):
    c = load(run, "compare.json")
    for p in c["paired"].values():
        p["value"], p["lo"], p["hi"] = -p["value"], -p["hi"], -p["lo"]
    c["paired"]["retention"].update(value=0.00004, lo=-0.01, hi=0.01)
    save(run, "compare.json", c)
    rob = load(run, "robustness.json")
    rob["summary"]["faithfulness"] = {"judges": 0, "units": 0}
    rob["summary"]["lowest_is_gated"] = {"judges": 0, "units": 0}
    for u in rob["units"]:
        u["lowest_category"] = "health"
        health = next(c for c in u["categories"] if c["category"] == "health")
        health.update(support_rate=0.5, lo=0.45, hi=0.55)
    save(run, "robustness.json", rob)
    noise = load(run, "noise.json")
    noise["judges"][0]["flip_rate"] = {"value": 0.0, "lo": 0.0, "hi": 0.0}
    save(run, "noise.json", noise)
    text = findings_of(run)
    assert f"lower on faithfulness by {100 * abs(c['paired']['faithfulness']['value']):.2f} points" in text
    assert f"lower on estimated coverage by {100 * abs(c['paired']['coverage']['value']):.2f} points" in text
    assert "equal on retention to two decimals (95% paired interval -1.00 to +1.00, which includes zero" in text
    assert "higher on" not in text
    assert "lowest-support category is health at 50.00% (95% percentile interval, persona bootstrap: 45.00–55.00); the next lowest is values" in text
    assert "The gated category (values) is not the lowest under this judge" in text
    assert "holds on faithfulness under none of the 3 judges" in text
    assert "The lowest-support category is the gated one under none of the judges" in text
    assert "does not flip any of its verdicts" in text


def test_findings_without_analysis_say_so(tmp_path):
    d = tmp_path / "labels_only"
    d.mkdir()
    shutil.copy(FIXTURE / "labels.jsonl", d)
    text = findings_of(d)
    assert "no findings to state" in text


def test_simulated_judges_and_simulated_truth_are_marked(run):
    (run / "truth.jsonl").write_text('{"assertion_id": "p0-a0", "kind": "supported"}\n')
    agr = load(run, "agreement.json")
    agr["gold"][0]["judge"] = "gold"
    agr["pairs"][0]["a"] = "gold"
    save(run, "agreement.json", agr)
    report(run, dpi=DPI)
    md = (run / "report.md").read_text()
    assert "> **Note.** Simulated results: labels from sim:strict, gold are simulated" in md
    assert "| sim:strict (simulated) |" in md and "| gold (simulated truth) |" in md
    html = (run / "report.html").read_text()
    assert "sim:strict (simulated)" in html and "gold (simulated truth)" in html


def test_coefficients_are_estimates_with_their_intervals(run):
    agr = load(run, "agreement.json")
    agr["krippendorff_alpha"] = {"value": 0.4567, "lo": None, "hi": None}
    agr["fleiss_kappa"] = {"value": 0.321, "lo": 0.3, "hi": 0.35}
    save(run, "agreement.json", agr)
    md = (report(run, formats="md", dpi=DPI).markdown).read_text()
    assert "Krippendorff's α (nominal, all judges): 0.457;" in md
    assert "Fleiss' κ (items every judge labelled): 0.321 [0.300, 0.350]" in md
    assert "Krippendorff's α is 0.457." in md


@pytest.mark.parametrize("name, edit, where", [
    # how older memjudge versions wrote these intervals: a [lo, hi] list beside a bare number
    ("noise.json", lambda o: o["judges"][0].update(flip_rate=0.05, flip_rate_ci=[0.04, 0.06]), "judges[0].flip_rate"),
    ("agreement.json", lambda o: o.update(krippendorff_alpha=0.61), "krippendorff_alpha"),
    ("compare.json", lambda o: o["policies"]["global"].update(retention=0.8), "policies.global.retention"),
])
def test_an_interval_in_an_older_shape_exits_2_naming_file_and_key(run, cli, name, edit, where):
    obj = load(run, name)
    edit(obj)
    save(run, name, obj)
    r = cli("report", str(run))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(run / name) in r.stderr and where in r.stderr and '{"value", "lo", "hi"}' in r.stderr


# ---------------------------------------------------------------------------------------
# end to end: the analysis commands write their JSON with --out, the report reads it back


def test_end_to_end_on_real_commands(tmp_path, cli, capsys):
    sample = Path(__file__).parent / "data" / "synthpai_sample"
    inp, out = tmp_path / "in", tmp_path / "run"
    steps = [
        ("import", "synthpai", sample, "--out", inp),
        ("compare", inp / "candidates.jsonl", "--labels", inp / "labels.jsonl", "--judge", "synthpai:human-checked",
         "--gate", "auto", "--repeats", "2", "--out", out),
        ("robustness", inp / "candidates.jsonl", "--labels", inp / "labels.jsonl", "--gate", "auto", "--repeats", "1",
         "--out", out),
        ("agreement", inp / "labels.jsonl", "--out", out),
        ("noise", inp / "labels.jsonl", "--out", out),
    ]
    from memjudge.cli import main

    for args in steps:  # in-process, to spare five interpreter start-ups; the report runs as a subprocess
        assert main([str(a) for a in args]) == 0, args[0]
    r = cli("report", out)
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    c = load(out, "compare.json")
    rows = {row[0]: row for row in md_table(md, "Table 1.")}
    pol = c["policies"]["targeted"]
    assert nums(rows["Targeted (auto)"][1]) == [p2(pol["faithfulness"]["value"]), p2(pol["faithfulness"]["sd"])]
    assert rows["Targeted (auto)"][3] == "—"  # the importer gives no coverage
    pf = c["paired"]["faithfulness"]
    assert nums(rows["Targeted − global (paired)"][1]) == [p2(pf["value"]), p2(pf["lo"]), p2(pf["hi"])]
    ch = c["paired_vs_write_all"]["targeted"]["faithfulness"]
    assert nums(rows["Targeted − write-all (paired)"][1]) == [p2(ch["value"]), p2(ch["lo"]), p2(ch["hi"])]
    wa = c["write_all_ci"]["faithfulness"]
    assert nums(rows["Write-all (full sample)"][1]) == [p2(wa["value"]), p2(wa["lo"]), p2(wa["hi"])]
    rob = load(out, "robustness.json")
    support = {r[0]: r for r in md_table(md, "Support by category")}
    o = rob["units"][0]["overall"]
    assert nums(support["Overall (all categories)"][1]) == [p2(o["value"]), p2(o["lo"]), p2(o["hi"])]
    agr = load(out, "agreement.json")
    assert nums(md_table(md, "Agreement between judges")[0][4])[0] == round(agr["pairs"][0]["cohen_kappa"]["value"], 3)
    # no replicates in this data: the noise part is present but says why it has no rate
    assert "no flip rate could be computed" in md
    assert {p.name for p in out.glob("fig_*.png")} == {
        "fig_support_by_category.png", "fig_faithfulness_vs_coverage.png", "fig_calibration.png",
        "fig_agreement.png", "fig_fold_differences.png"}
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5


def test_end_to_end_on_a_simulated_corpus(tmp_path, capsys):
    from memjudge.cli import main

    corpus, out = tmp_path / "corpus", tmp_path / "run"
    assert main(["simulate", "--preset", "paper", "--personas", "12", "--seed", "3", "--out", str(corpus)]) == 0
    assert main(["compare", str(corpus / "candidates.jsonl"), "--labels", str(corpus / "labels.jsonl"),
                 "--coverage", str(corpus / "coverage.jsonl"), "--repeats", "2", "--out", str(out)]) == 0
    res = report(out, dpi=DPI)
    md = res.markdown.read_text()
    c = load(out, "compare.json")
    rows = {row[0]: row for row in md_table(md, "Table 1.")}
    wa = rows["Write-all (full sample)"]
    ci = c["write_all_ci"]["coverage"]
    assert nums(wa[3]) == [p2(c["write_all"]["coverage"]), p2(ci["lo"]), p2(ci["hi"])]
    pc = c["paired"]["coverage"]
    assert nums(rows["Targeted − global (paired)"][3]) == [p2(pc["value"]), p2(pc["lo"]), p2(pc["hi"])]
    # the compared labels are the corpus's construction truth, found through compare_inputs.json
    assert "Data: compare.json — judge gold (simulated truth);" in md
    assert "Simulated results: labels from gold are simulated" in md
    assert {p.name for p in res.figures} == {"fig_faithfulness_vs_coverage.png", "fig_fold_differences.png",
                                             "fig_calibration.png"}


def test_hand_written_files_in_the_documented_shapes_are_read(tmp_path):
    """Minimal robustness.json, calibration.json and sweep.json with only the keys the report reads."""
    d = tmp_path / "hand"
    d.mkdir()
    save(d, "robustness.json", {"gate": ["values"], "units": [
        {"judge": "J1", "lowest_category": "values", "gated": ["values"],
         "categories": [{"category": "values", "support_rate": 0.7, "lo": 0.6, "hi": 0.8, "valid": 40},
                        {"category": "work", "support_rate": 0.95, "lo": 0.9, "hi": 0.99, "valid": 60}]}]})
    save(d, "calibration.json", {"categories": [{"category": "values", "bins": [
        {"conf_lo": 0.0, "conf_hi": 0.5, "valid": 10, "support_rate": 0.5, "ci_lo": 0.3, "ci_hi": 0.7},
        {"conf_lo": 0.5, "conf_hi": 1.0, "valid": 12, "support_rate": 0.75, "ci_lo": 0.5, "ci_hi": 0.9}]}]})
    save(d, "sweep.json", {"floor": 0.8, "global": [
        {"threshold": None, "faithfulness": 0.9, "retention": 1.0, "coverage": 0.9},
        {"threshold": 0.5, "faithfulness": 0.93, "retention": 0.85, "coverage": 0.8},
        {"threshold": 0.9, "faithfulness": 0.97, "retention": 0.4, "coverage": 0.4}]})
    res = report(d, formats="md", dpi=DPI)
    md = res.markdown.read_text()
    assert nums(md_table(md, "Support by category")[0][1]) == [70.0, 60.0, 80.0]
    assert [nums(r[2]) for r in md_table(md, "Calibration of the values category")] == [[50.0, 30.0, 70.0],
                                                                                         [75.0, 50.0, 90.0]]
    assert "Under J1, the lowest-support category is values at 70.00%" in md
    assert {p.name for p in res.figures} == {"fig_support_by_category.png", "fig_calibration.png",
                                             "fig_faithfulness_vs_coverage.png"}


def test_robustness_intervals_and_probability_are_labelled(rendered):
    md = (rendered / "report.md").read_text()
    rob = load(rendered, "robustness.json")
    assert "**Support by category and overall, % [95% percentile interval (persona bootstrap)]." in md
    notes = md.split("**Robustness across judges.", 1)[1].split("\n\n*", 1)[1].split("*\n", 1)[0]
    assert "brackets: 95% percentile interval (per-fold differences)" in notes
    assert "P(gated is lowest): the share of persona-bootstrap resamples" in notes
    cells = [r[3] for r in md_table(md, "Robustness across judges")]
    assert cells == [f"{u['p_gated_lowest']:.3f}" for u in rob["units"]]  # a fraction, three decimals


def test_demo_parts_embedded_judge_quality(run):
    q = {"judge": "local:qwen2.5-coder-1.5b", "n": 250, "gold_supported": 220, "threshold": -1.9, "auc": 0.8312,
         "balanced_accuracy": 0.7421, "accuracy": 0.81, "in_sample_best_threshold": -1.2,
         "in_sample_best_balanced_accuracy": 0.77, "note": "threshold calibrated on other data"}
    save(run, "local_judge.json", q)
    save(run, "demo.json", {"seconds": {"total": 412.5}, "summary": {"personas": 10}})
    md = report(run, formats="md", dpi=DPI).markdown.read_text()
    rows = {r[0]: r[1] for r in md_table(md, "Embedded judge against the corpus's gold labels")}
    assert rows["AUC of the log-odds"] == "0.831" and rows["Threshold (log-odds)"] == "-1.90"
    assert rows["Accuracy (%)"] == "81.00"
    assert ("The embedded judge local:qwen2.5-coder-1.5b separates supported from unsupported assertions with "
            "AUC 0.831 against the gold labels (250 items); balanced accuracy 0.742 at its calibrated threshold -1.90.") in md
    assert "| seconds.total | 412.5 |" in md


def test_table1_says_strict_binary_and_the_comparison_notes(run):
    c = load(run, "compare.json")
    c["strict_binary"] = True
    c["notes"] = ["3 candidates have a verdict other than supported/unsupported: excluded from faithfulness",
                  "12 reference facts without a coverage verdict excluded"]
    save(run, "compare.json", c)
    rob = load(run, "robustness.json")
    rob["strict_binary"] = True
    save(run, "robustness.json", rob)
    md = report(run, formats="md", dpi=DPI).markdown.read_text()
    t1 = md.split("**Table 1.", 1)[1].split("\n## ", 1)[0]
    assert "Strict binary: verdicts other than supported/unsupported are left out of faithfulness" in t1
    assert "Notes: 3 candidates have a verdict other than supported/unsupported: excluded from faithfulness; " \
           "12 reference facts without a coverage verdict excluded." in t1
    support = md.split("**Support by category", 1)[1].split("\n## ", 1)[0]
    assert "strict binary: verdicts other than supported/unsupported left out" in support


def test_older_compare_json_without_the_new_keys_still_reports(run):
    c = load(run, "compare.json")
    for k in ("write_all_ci", "paired_vs_write_all", "notes", "B", "strict_binary"):
        c.pop(k)
    save(run, "compare.json", c)
    rob = load(run, "robustness.json")
    for u in rob["units"]:
        u.pop("overall")
    save(run, "robustness.json", rob)
    md = report(run, formats="md", dpi=DPI).markdown.read_text()
    rows = {r[0]: r for r in md_table(md, "Table 1.")}
    assert list(rows) == ["Write-all (full sample)", "Global threshold", "Targeted (values)", "Targeted − global (paired)"]
    assert nums(rows["Write-all (full sample)"][1]) == [p2(c["write_all"]["faithfulness"])]
    assert "Overall (all categories)" not in {r[0] for r in md_table(md, "Support by category")}
