"""Each figure function draws a readable PNG of paper size from tidy data, and degrades to a
labelled placeholder when it has nothing to draw."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from memjudge.reporting import figures as F

DATA = Path(__file__).parent / "data"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def rates() -> pd.DataFrame:
    rows = []
    for j, shift in (("gemini:gemini-2.5-pro", 0.0), ("sim:lenient (simulated)", 0.02)):
        for c, r in (("values", 0.779), ("work", 0.96), ("health", 0.955), ("preferences", 0.97)):
            rows.append({"judge": j, "category": c, "rate": r + shift, "lo": r + shift - 0.02, "hi": r + shift + 0.02})
    return pd.DataFrame(rows)


def sweep() -> pd.DataFrame:
    t = np.linspace(0.2, 0.95, 20)
    ret = 1 - t * 0.6
    return pd.DataFrame({"threshold": t, "faithfulness": 0.92 + 0.05 * t, "retention": ret, "coverage": 0.98 - 0.5 * t})


def points() -> pd.DataFrame:
    return pd.DataFrame([
        {"label": "Write-all", "policy": "write_all", "kind": "full", "faithfulness": 0.9224, "retention": 1.0,
         "coverage": 0.98},
        {"label": "Global", "policy": "global", "kind": "heldout", "faithfulness": 0.9383, "retention": 0.818,
         "coverage": 0.83, "faithfulness_sd": 0.01, "coverage_sd": 0.02},
        {"label": "Targeted", "policy": "targeted", "kind": "heldout", "faithfulness": 0.9603, "retention": 0.803,
         "coverage": 0.96, "faithfulness_sd": 0.012, "coverage_sd": 0.01},
    ])


def bins() -> pd.DataFrame:
    rows = []
    for c in ("values", "work", "health"):
        for lo in np.arange(0, 1, 0.2):
            rate = 0.59 + 0.31 * lo if c == "values" else 0.95
            rows.append({"category": c, "lo": lo, "hi": lo + 0.2, "n": 50 + 10 * lo, "rate": rate,
                         "ci_lo": rate - 0.05, "ci_hi": min(1.0, rate + 0.05)})
    return pd.DataFrame(rows)


def flips() -> pd.DataFrame:
    rows = []
    for j, base in (("gemini:gemini-2.5-pro", 0.047), ("sim:noisy (simulated)", 0.09)):
        for c in ("all", "values", "work"):
            rows.append({"judge": j, "category": c, "flip_rate": base, "lo": base - 0.01, "hi": base + 0.01,
                         "items": 100})
    return pd.DataFrame(rows)


def pairs() -> pd.DataFrame:
    return pd.DataFrame([
        {"a": "A", "b": "B", "n": 100, "cohen_kappa": 0.6, "gwet_ac1": 0.85},
        {"a": "A", "b": "C", "n": 100, "cohen_kappa": -0.1, "gwet_ac1": 0.8},
        {"a": "B", "b": "C", "n": 100, "cohen_kappa": None, "gwet_ac1": 0.7},
    ])


def diffs() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame([{"metric": m, "difference": d} for m, mu in (("faithfulness", 0.02), ("retention", -0.01),
                                                                       ("coverage", 0.13))
                         for d in rng.normal(mu, 0.01, 20)])


PAIRED = {"faithfulness": {"value": 0.02, "lo": 0.002, "hi": 0.04, "nb_lo": -0.005, "nb_hi": 0.045},
          "coverage": {"value": 0.13, "lo": 0.1, "hi": 0.16, "nb_lo": None, "nb_hi": None}}

CASES = {
    "support": (lambda: F.support_by_category(rates(), gated=["values"]), (6.5, 4.0)),
    "sweep": (lambda: F.faithfulness_vs_coverage(sweep(), points(), floor=0.8), (6.5, 4.4)),
    "sweep_retention": (lambda: F.faithfulness_vs_coverage(sweep(), points(), floor=0.8, x="retention"), (6.5, 4.4)),
    "calibration": (lambda: F.calibration(bins(), emphasise="values"), (6.5, 4.6)),
    "flip": (lambda: F.flip_rate_by_category(flips()), (6.5, 4.0)),
    "agreement": (lambda: F.agreement_matrix(pairs()), (6.5, 3.6)),
    "folds": (lambda: F.fold_differences(diffs(), PAIRED), (6.5, 3.6)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_figure_is_a_paper_sized_png(name, tmp_path):
    make, (w, h) = CASES[name]
    fig = make()
    path = F.save_png(fig, tmp_path / f"{name}.png", dpi=100)
    data = path.read_bytes()
    assert png_size(data) == (round(w * 100), round(h * 100))
    assert len(data) > 5_000, "a drawn figure, not a blank canvas"


def test_axes_carry_labels_units_and_judge_names():
    fig = F.support_by_category(rates(), gated=["values"])
    ax = fig.axes[0]
    assert "%" in ax.get_ylabel()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["gemini:gemini-2.5-pro", "sim:lenient (simulated)"]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0] == "values\n(gated)", "lowest category first and marked as gated"

    fig = F.faithfulness_vs_coverage(sweep(), points(), floor=0.8)
    ax = fig.axes[0]
    assert "coverage" in ax.get_xlabel().lower() and "%" in ax.get_xlabel()
    assert "Faithfulness" in ax.get_ylabel()
    # the curve is solid only where retention meets the floor
    solid = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-" and ln.get_label().startswith("Global")]
    assert len(solid) == 1
    y = solid[0].get_ydata()
    kept = sweep().sort_values("threshold")["retention"].to_numpy() >= 0.8  # drawn in threshold order
    assert np.all(np.isnan(np.asarray(y, dtype=float)[~kept])) and not np.any(np.isnan(np.asarray(y, dtype=float)[kept]))


def test_a_judge_keeps_its_colour_across_figures():
    styles = F.judge_styles(["sim:noisy (simulated)", "gemini:gemini-2.5-pro"])
    fig = F.flip_rate_by_category(flips(), styles=styles)
    colour = {t.get_text(): h.get_facecolor() for t, h in zip(fig.legends[0].get_texts(), fig.legends[0].legend_handles)}
    import matplotlib.colors as mc

    assert mc.to_hex(colour["sim:noisy (simulated)"]) == styles["sim:noisy (simulated)"][0].lower()
    assert mc.to_hex(colour["gemini:gemini-2.5-pro"]) == styles["gemini:gemini-2.5-pro"][0].lower()


def test_a_measured_zero_flip_rate_is_labelled():
    f = flips()
    f.loc[f["judge"] == "gemini:gemini-2.5-pro", ["flip_rate", "lo", "hi"]] = 0.0
    fig = F.flip_rate_by_category(f)
    assert sum(t.get_text() == "0" for t in fig.axes[0].texts) == 3


def test_values_drawn_are_the_data_in_percent():
    fig = F.flip_rate_by_category(flips())
    heights = sorted(round(p.get_height(), 6) for p in fig.axes[0].patches if p.get_height() > 0)
    assert heights == sorted([4.7] * 3 + [9.0] * 3)
    fig = F.agreement_matrix(pairs())
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"0.60", "-0.10"} <= texts  # κ panel: the value is printed even where the colour clips
    assert {"0.85", "0.80", "0.70"} <= {t.get_text() for t in fig.axes[1].texts}


@pytest.mark.parametrize("fn, arg", [
    (F.support_by_category, pd.DataFrame(columns=["judge", "category", "rate", "lo", "hi"])),
    (F.calibration, pd.DataFrame(columns=["category", "lo", "hi", "n", "rate"])),
    (F.flip_rate_by_category, pd.DataFrame(columns=["judge", "category", "flip_rate", "lo", "hi"])),
    (F.agreement_matrix, pd.DataFrame(columns=["a", "b", "cohen_kappa", "gwet_ac1"])),
    (F.fold_differences, pd.DataFrame(columns=["metric", "difference"])),
])
def test_empty_data_gives_a_placeholder_not_an_error(fn, arg):
    fig = fn(arg)
    assert any("no " in t.get_text() for ax in fig.axes for t in ax.texts)


def test_missing_interval_draws_without_error_bars():
    r = rates()
    r["lo"] = np.nan
    r["hi"] = np.nan
    data = F.png_bytes(F.support_by_category(r), dpi=60)
    assert data[:8] == PNG_SIGNATURE


def _drawn_columns(fig):
    """The lower panel's bars as {legend label: total height}."""
    axn = fig.axes[1]
    out = {}
    for container in axn.containers:
        out[container.get_label()] = out.get(container.get_label(), 0.0) + sum(p.get_height() for p in container.patches)
    return out


def test_calibration_count_panel_keeps_every_candidate_when_bin_centres_differ_by_rounding():
    # values: distinct confidences (one-value bins, one of them 0.85); the others: deciles whose
    # midpoint (0.8 + 0.9) / 2 is 0.8500000000000001. Bars ~1e-16 wide drew nothing before.
    bins = pd.DataFrame([
        {"category": "values", "lo": 0.55, "hi": 0.55, "n": 7, "rate": 0.7},
        {"category": "values", "lo": 0.85, "hi": 0.85, "n": 12, "rate": 0.8},
        {"category": "work", "lo": 0.8, "hi": 0.9, "n": 30, "rate": 0.95},
        {"category": "work", "lo": 0.9, "hi": 1.0, "n": 41, "rate": 0.97},
        {"category": "health", "lo": 0.5, "hi": 0.6, "n": 5, "rate": 0.9},
        {"category": "health", "lo": 0.8, "hi": 0.9, "n": 9, "rate": 0.92},
    ])
    cols = F.count_columns(bins, "values")
    assert cols.groupby("group")["n"].sum().to_dict() == {"emphasised": 19, "other": 85}
    # 0.85 falls in the decile column [0.8, 0.9) with the others' bins of that decile
    assert set(zip(cols["lo"], cols["hi"])) == {(0.5, 0.6), (0.8, 0.9), (0.9, 1.0)}
    assert cols.loc[(cols["group"] == "emphasised") & (cols["lo"] == 0.8), "n"].item() == 12
    fig = F.calibration(bins, emphasise="values")
    drawn = _drawn_columns(fig)
    assert drawn == {"values": 19.0, "other categories": 85.0}
    widths = [p.get_width() for c in fig.axes[1].containers for p in c.patches]
    assert min(widths) > 0.05  # visible, not 1e-16


def test_calibration_count_panel_sums_to_the_candidates_of_a_real_run():
    from memjudge.reporting.frames import calibration_frame
    from memjudge.reporting.reader import load_run

    run = load_run(DATA / "report_run")
    bins = calibration_frame(run)
    fig = F.calibration(bins, emphasise="values")
    drawn = _drawn_columns(fig)
    want_values = float(bins.loc[bins["category"] == "values", "n"].sum())
    want_other = float(bins.loc[bins["category"] != "values", "n"].sum())
    assert drawn == {"values": want_values, "other categories": want_other}


def test_calibration_one_value_bins_only_are_drawn_at_their_values():
    bins = pd.DataFrame([
        {"category": "a", "lo": 0.0, "hi": 0.0, "n": 3, "rate": 0.5},
        {"category": "a", "lo": 1 / 3, "hi": 1 / 3, "n": 4, "rate": 0.6},
        {"category": "b", "lo": 1 / 3, "hi": 1 / 3, "n": 2, "rate": 0.7},
        {"category": "b", "lo": 2 / 3, "hi": 2 / 3, "n": 5, "rate": 0.8},
    ])
    cols = F.count_columns(bins, None)
    assert cols["n"].tolist() == [3.0, 6.0, 5.0]
    fig = F.calibration(bins)
    assert _drawn_columns(fig) == {"all categories": 14.0}
