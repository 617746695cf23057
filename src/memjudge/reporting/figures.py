"""The report's figures: one pure function per figure, tidy data in, a matplotlib Figure out.

Each function takes the numbers exactly as a run directory's JSON holds them (fractions,
reshaped into small DataFrames by `memjudge.reporting`) and draws them; none computes a
statistic. Figures are built on `matplotlib.figure.Figure` directly (never pyplot), so no
global state or display is involved and the Agg canvas renders them anywhere. Sizes suit a
paper column pair (6.5 × 4 in); colours are the Okabe–Ito palette, safe for colour-blind
readers, and every series is also told apart by marker or hatch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

PAPER_SIZE = (6.5, 4.0)
DPI = 200
# Okabe & Ito (2008): distinguishable under the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
HIGHLIGHT = "#D55E00"  # vermillion: the gated / emphasised category
NEUTRAL = "#7F7F7F"
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
HATCHES = ["", "//", "..", "xx", "\\\\", "++", "oo", "--"]

_RC: dict[RcKeyType, Any] = {
    "font.size": 8.5,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9,
    "legend.fontsize": 7.5,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _paper_style(fn):
    """Artists take their font sizes when created, so the whole drawing runs in the style."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context(_RC):
            return fn(*args, **kwargs)

    return wrapper


def _new_figure(size=PAPER_SIZE) -> Figure:
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _style(ax, grid: str = "y") -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(axis=grid, color="#E5E5E5", linewidth=0.6)
    ax.set_axisbelow(True)


def _pct(x) -> np.ndarray:
    return 100.0 * np.asarray(x, dtype=float)


def _yerr(rate, lo, hi) -> np.ndarray:
    """Asymmetric error bars from an interval; a missing bound draws no bar on that side."""
    rate, lo, hi = (np.asarray(v, dtype=float) for v in (rate, lo, hi))
    below = np.where(np.isnan(lo), 0.0, rate - lo)
    above = np.where(np.isnan(hi), 0.0, hi - rate)
    return np.vstack([np.clip(below, 0, None), np.clip(above, 0, None)])


def _empty(fig: Figure, message: str) -> Figure:
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    return fig


def save_png(fig: Figure, path, dpi: int = DPI) -> Path:
    """Write `fig` as PNG; returns the path."""
    from memjudge.formats import write_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, png_bytes(fig, dpi))  # savefig(path) would follow a link planted there
    return path


def png_bytes(fig: Figure, dpi: int = DPI) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": "memjudge"})
    return buf.getvalue()


# ---------------------------------------------------------------------------------------
# Figure 1a


def judge_styles(judges: Sequence[str]) -> dict[str, tuple[str, str]]:
    """A (colour, hatch) per judge, in the given order: pass the same mapping to every figure of
    a report so that a judge looks the same everywhere."""
    return {j: (PALETTE[i % len(PALETTE)], HATCHES[i % len(HATCHES)]) for i, j in enumerate(dict.fromkeys(judges))}


def _judge_legend(fig: Figure, ax, n: int) -> None:
    # Below the axes: bars reach the top of the plot, so any inside corner hides data.
    handles, labels = ax.get_legend_handles_labels()
    ncols = min(n, 4) if sum(len(t) for t in labels[:4]) <= 84 else min(n, 2)  # ~6.5 in of legend text per row
    fig.legend(handles, labels, title="Judge", loc="outside lower center", ncols=ncols, frameon=False)


def _judge_bars(ax, data: pd.DataFrame, column: str, judges: list, cats: list,
                styles: dict[str, tuple[str, str]]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """`column` (a fraction) as one bar per judge within each category, with the lo/hi interval
    as error bars; returns (judge, bar positions, values in %) per judge."""
    width = 0.8 / len(judges)
    x = np.arange(len(cats))
    drawn = []
    for j, judge in enumerate(judges):
        sub = data[data["judge"] == judge].set_index("category").reindex(cats)
        rate = _pct(sub[column])
        xs = x - 0.4 + width * (j + 0.5)
        ax.bar(xs, rate, width * 0.92, color=styles[judge][0], hatch=styles[judge][1],
               edgecolor="white", linewidth=0.4, label=str(judge),
               yerr=_yerr(rate, _pct(sub["lo"]), _pct(sub["hi"])),
               error_kw={"elinewidth": 0.9, "capsize": 2, "ecolor": "#222222"})
        drawn.append((judge, xs, rate))
    return drawn


def _category_axis(fig: Figure, ax, labels: list[str], n_judges: int, ylabel: str, title: str) -> None:
    """Category ticks (slanted when many), the axis labels, the title and the judge legend."""
    many = len(labels) > 7
    ax.set_xticks(np.arange(len(labels)), labels, rotation=30 if many else 0, ha="right" if many else "center")
    ax.set_ylabel(ylabel)
    ax.set_xlabel("Category (bars: 95% persona-cluster bootstrap intervals)")
    ax.set_title(title)
    _judge_legend(fig, ax, n_judges)


@_paper_style
def support_by_category(rates: pd.DataFrame, gated: Sequence[str] = (), title: str | None = None,
                        styles: dict[str, tuple[str, str]] | None = None) -> Figure:
    """Support rate by category with 95% intervals, one bar per judge within each category.

    `rates`: columns judge, category, rate, lo, hi (fractions; lo/hi may be NaN). Categories
    are ordered by the first judge's rate, lowest first, so the outlier leads. Gated
    categories are shaded and labelled.
    """
    fig = _new_figure()
    if rates.empty:
        return _empty(fig, "no support rates in this run")
    ax = fig.add_subplot()
    _style(ax)
    judges = list(dict.fromkeys(rates["judge"]))
    first = rates[rates["judge"] == judges[0]].set_index("category")["rate"]
    cats = list(first.sort_values(kind="stable").index)
    cats += [c for c in dict.fromkeys(rates["category"]) if c not in cats]
    styles = {**judge_styles(judges), **(styles or {})}
    shaded = set(gated or ())
    for i, c in enumerate(cats):
        if c in shaded:
            ax.axvspan(i - 0.48, i + 0.48, color=HIGHLIGHT, alpha=0.10, linewidth=0)
    _judge_bars(ax, rates, "rate", judges, cats, styles)
    _category_axis(fig, ax, [f"{c}\n(gated)" if c in gated else str(c) for c in cats], len(judges),
                   "Source support (% of valid verdicts)", title or "Support by category")
    for lab, c in zip(ax.get_xticklabels(), cats):
        if c in gated:
            lab.set_color(HIGHLIGHT)
            lab.set_fontweight("bold")
    ax.set_ylim(0, 104)
    return fig


# ---------------------------------------------------------------------------------------
# Figure 1b


@_paper_style
def faithfulness_vs_coverage(sweep: pd.DataFrame, points: pd.DataFrame, floor: float | None = None,
                             x: str = "coverage", title: str | None = None,
                             targeted_sweep: pd.DataFrame | None = None, targeted_label: str | None = None) -> Figure:
    """The global-threshold sweep as a curve and fitted policies as points.

    `sweep`: columns threshold, faithfulness, retention, coverage (one row per candidate
    threshold, full sample); drawn solid where retention meets `floor`, dotted below it.
    `points`: columns label, faithfulness, coverage, retention, and optional
    faithfulness_sd, coverage_sd, retention_sd (error bars) and kind ("heldout" or "full").
    `x` is "coverage" (estimated coverage) or "retention" when a run has no coverage.
    `targeted_sweep` (same columns), when given, is the gated-category threshold's sweep, drawn
    thin and dashed for context.
    """
    fig = _new_figure((6.5, 4.4))
    if sweep.empty and points.empty:
        return _empty(fig, "no sweep or policy points in this run")
    ax = fig.add_subplot()
    _style(ax)
    ax.grid(axis="x", color="#E5E5E5", linewidth=0.6)
    view_x, view_y = [], []
    # A sweep is a path through thresholds, so it is drawn in threshold order (−∞ first).
    def order(df):
        return df.assign(_t=df["threshold"].fillna(-np.inf)).sort_values("_t", kind="stable")

    # Zoomed in (lowest_shown set) only with a floor and a sweep whose retentions meet it or not.
    zoom = floor is not None and not sweep.empty and sweep["retention"].notna().any()
    lowest_shown = max(0.0, floor - 0.25) if floor is not None and zoom else None
    if not sweep.empty:
        s = order(sweep)
        xs, ys = _pct(s[x]), _pct(s["faithfulness"])
        ax.plot(xs, ys, color=NEUTRAL, linewidth=1.0, linestyle=":", zorder=1)
        ax.scatter(xs, ys, s=6, color=NEUTRAL, zorder=2)
        if floor is not None and lowest_shown is not None:
            ret = s["retention"].to_numpy(dtype=float)
            ok = ret >= floor - 1e-12
            ax.plot(np.where(ok, xs, np.nan), np.where(ok, ys, np.nan), color=NEUTRAL, linewidth=1.8, zorder=2,
                    label=f"Global threshold sweep, full sample (solid: retention ≥ {100 * floor:.0f}%)")
            shown = ret >= lowest_shown - 1e-12
            view_x += list(xs[shown])
            view_y += list(ys[shown])
        else:
            ax.lines[-1].set_linestyle("-")
            ax.lines[-1].set_label("Global threshold sweep, full sample")
            view_x += list(xs)
            view_y += list(ys)
    if targeted_sweep is not None and not targeted_sweep.empty:
        t = order(targeted_sweep)
        ax.plot(_pct(t[x]), _pct(t["faithfulness"]), color=HIGHLIGHT, alpha=0.55, linewidth=1.0, linestyle="--",
                zorder=1, label=targeted_label or "Targeted threshold sweep")
    styles = {"write_all": ("#000000", "s"), "global": (PALETTE[0], "o"), "targeted": (HIGHLIGHT, "D"),
              "per_category": (PALETTE[2], "^")}
    extra = 0
    for _, p in points.iterrows():
        key = str(p.get("policy", p["label"]))
        if key in styles:
            color, marker = styles[key]
        else:
            color, marker = PALETTE[(3 + extra) % len(PALETTE)], MARKERS[(3 + extra) % len(MARKERS)]
            extra += 1
        full = str(p.get("kind", "heldout")) == "full"
        xerr = p.get(f"{x}_sd")
        yerr = p.get("faithfulness_sd")
        xerr = None if xerr is None or pd.isna(xerr) else 100 * float(xerr)
        yerr = None if yerr is None or pd.isna(yerr) else 100 * float(yerr)
        px, py = 100 * float(p[x]), 100 * float(p["faithfulness"])
        ax.errorbar(px, py, xerr=xerr, yerr=yerr, fmt=marker, color=color, markersize=7,
                    markerfacecolor="white" if full else color, markeredgewidth=1.4, elinewidth=0.9, capsize=2,
                    zorder=4, label=str(p["label"]))
        view_x += [px - (xerr or 0), px + (xerr or 0)]
        view_y += [py - (yerr or 0), py + (yerr or 0)]
    if lowest_shown is not None and view_x:
        # Thresholds that discard most candidates stretch the axes far from the fitted policies;
        # the view keeps the policies and the sweep down to `lowest_shown` retention.
        (x0, x1), (y0, y1) = (np.nanmin(view_x), np.nanmax(view_x)), (np.nanmin(view_y), np.nanmax(view_y))
        mx, my = max(0.5, 0.06 * (x1 - x0)), max(0.2, 0.08 * (y1 - y0))
        ax.set_xlim(x0 - mx, x1 + mx)
        ax.set_ylim(y0 - my, y1 + my)
        if (sweep["retention"].to_numpy(dtype=float) < lowest_shown - 1e-12).any():
            ax.text(0.99, 0.01, f"sweep thresholds keeping < {100 * lowest_shown:.0f}% of candidates lie off this view",
                    transform=ax.transAxes, ha="right", va="bottom", fontsize=6.5, color="#555555")
    ax.set_xlabel("Estimated coverage (% of reference facts)" if x == "coverage" else "Retention (% of candidates kept)")
    ax.set_ylabel("Faithfulness (% of retained supported)")
    ax.set_title(title or "Faithfulness vs estimated coverage")
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    return fig


# ---------------------------------------------------------------------------------------
# calibration


def count_columns(bins: pd.DataFrame, emphasise: str | None = None) -> pd.DataFrame:
    """The lower panel of the calibration figure as data: one row per (group, column) with
    columns group ("emphasised" or "other"), lo, hi, n.

    Columns are the bins' own edges, matched after rounding to 9 digits (so 0.6000000000000001
    and 0.6 are one edge, and 0.85 is not a different column from (0.8 + 0.9) / 2). A one-value
    bin (a distinct confidence, lo == hi) is counted in the interval bin that holds its value
    when there is one, else in a column of its own. Each group's heights sum to its candidates."""
    b = bins[bins["n"].fillna(0) > 0]
    lo = np.round(b["lo"].to_numpy(dtype=float), 9)
    hi = np.round(b["hi"].to_numpy(dtype=float), 9)
    spans = sorted({(x, y) for x, y in zip(lo, hi) if y > x})
    col_lo, col_hi = lo.copy(), hi.copy()
    top = max((y for _, y in spans), default=None)  # the last span is closed on the right
    for i in np.flatnonzero(lo == hi):
        inside = [(x, y) for x, y in spans if x <= lo[i] < y or lo[i] == y == top]
        if inside:
            col_lo[i], col_hi[i] = inside[0]
    group = np.where(b["category"].to_numpy() == emphasise, "emphasised", "other") if emphasise else np.full(len(b), "other")
    out = pd.DataFrame({"group": group, "lo": col_lo, "hi": col_hi, "n": b["n"].to_numpy(dtype=float)})
    # pandas-stubs types a column's groupby sum as a Series; with as_index=False it is a DataFrame
    return out.groupby(["group", "lo", "hi"], as_index=False, sort=True)["n"].sum()  # type: ignore[return-value]


def _column_widths(cols: pd.DataFrame) -> np.ndarray:
    """An interval column is as wide as its bin; a one-value column gets a share of the
    smallest gap between columns, so that its count stays visible."""
    lo, hi = cols["lo"].to_numpy(dtype=float), cols["hi"].to_numpy(dtype=float)
    gaps = np.diff(np.unique(np.round((lo + hi) / 2, 9)))
    gaps = gaps[gaps > 1e-9]
    point = 0.6 * (gaps.min() if len(gaps) else 0.1)
    return np.where(hi > lo, hi - lo, point)


@_paper_style
def calibration(bins: pd.DataFrame, emphasise: str | None = None, title: str | None = None) -> Figure:
    """Support rate by confidence bin within each category, with counts.

    `bins`: columns category, lo, hi (bin edges), n, rate and optional ci_lo, ci_hi. The
    `emphasise` category (the gated one) is drawn thick with its intervals and per-bin
    counts; other categories are thin. A lower panel shows the counts per bin.
    """
    fig = _new_figure((6.5, 4.6))
    if bins.empty:
        return _empty(fig, "no calibration bins in this run")
    gs = fig.add_gridspec(2, 1, height_ratios=[3.2, 1.0])
    ax = fig.add_subplot(gs[0])
    axn = fig.add_subplot(gs[1], sharex=ax)
    _style(ax)
    _style(axn)
    cats = list(dict.fromkeys(bins["category"]))
    if emphasise not in cats:
        emphasise = None
    order = [c for c in cats if c != emphasise] + ([emphasise] if emphasise else [])
    k = 0
    n_max = max(1.0, float(bins["n"].max()))
    for c in order:
        sub = bins[bins["category"] == c].sort_values("lo", kind="stable")
        sub = sub[sub["n"].fillna(0) > 0]
        if sub.empty:
            continue
        centres = (sub["lo"].to_numpy(dtype=float) + sub["hi"].to_numpy(dtype=float)) / 2
        n_total = int(sub["n"].sum())
        rate = _pct(sub["rate"])
        if c == emphasise:
            color, lw, ms, z = HIGHLIGHT, 2.4, 6, 5
            lo = _pct(sub["ci_lo"]) if "ci_lo" in sub else np.full(len(sub), np.nan)
            hi = _pct(sub["ci_hi"]) if "ci_hi" in sub else np.full(len(sub), np.nan)
            ax.errorbar(centres, rate, yerr=_yerr(rate, lo, hi), color=color, linewidth=lw, marker="D", markersize=ms,
                        capsize=2.5, elinewidth=1.0, zorder=z, label=f"{c} (n={n_total:,})")
            for cx, r, n in zip(centres, rate, sub["n"]):
                ax.annotate(f"n={int(n)}", (cx, r), textcoords="offset points", xytext=(7, -9), ha="left",
                            fontsize=6.5, color=color)
        else:
            # Few categories get a colour each; many are one grey family (named in the legend once),
            # so the emphasised curve stays the figure's subject.
            few = len(cats) <= 5
            color = PALETTE[k % len(PALETTE)] if few else NEUTRAL
            marker = MARKERS[(k + 1) % len(MARKERS)]
            label = f"{c} (n={n_total:,})" if few else (
                f"other categories ({len(cats) - (1 if emphasise else 0)}, one line each)" if k == 0 else "_nolegend_")
            ax.plot(centres, rate, color=color, linewidth=0.8, alpha=0.6, zorder=3, label=label)
            # markers sized by the bin's count, so that sparse bins do not dominate the eye
            ax.scatter(centres, rate, s=4 + 36 * sub["n"].to_numpy(dtype=float) / n_max, color=color, alpha=0.75,
                       marker=marker, zorder=3, linewidth=0)
            k += 1
    cols = count_columns(bins, emphasise)
    cols["width"] = _column_widths(cols) * 0.9
    base: dict[float, float] = {}
    for name, color, alpha, z in (("emphasised", HIGHLIGHT, 0.85, 3), ("other", NEUTRAL, 0.35, 2)):
        g = cols[cols["group"] == name]
        if g.empty:
            continue
        centres = np.round((g["lo"].to_numpy() + g["hi"].to_numpy()) / 2, 9)
        bottom = np.array([base.get(x, 0.0) for x in centres])
        label = str(emphasise) if name == "emphasised" else ("other categories" if emphasise else "all categories")
        # Stacked, so the column height is the bin's total.
        axn.bar(centres, g["n"].to_numpy(), bottom=bottom, width=g["width"].to_numpy(), color=color, alpha=alpha, zorder=z, label=label)
        for x, n in zip(centres, g["n"].to_numpy()):
            base[x] = base.get(x, 0.0) + n
    ax.set_ylabel("Source support (%)")
    ax.set_ylim(max(0.0, float(np.nanmin(_pct(bins["rate"]))) - 15.0) if bins["rate"].notna().any() else 0, 102)
    ax.set_title(title or "Calibration: support by confidence bin within category")
    # Outside the axes: inside, it covered points, their n= labels and error bars.
    ax.legend(title="Category", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0.0)
    ax.tick_params(labelbottom=False)
    axn.set_ylabel("Candidates")
    axn.set_xlabel("Extractor confidence (bin centre)")
    axn.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0.0)
    return fig


# ---------------------------------------------------------------------------------------
# judge noise and agreement


@_paper_style
def flip_rate_by_category(flips: pd.DataFrame, title: str | None = None,
                          styles: dict[str, tuple[str, str]] | None = None) -> Figure:
    """Re-score flip rate by category with 95% intervals, one bar per judge.

    `flips`: columns judge, category, flip_rate, lo, hi (fractions), items. The category
    "all" (the judge's overall rate) is drawn first.
    """
    fig = _new_figure()
    if flips.empty:
        return _empty(fig, "no flip rates in this run")
    ax = fig.add_subplot()
    _style(ax)
    judges = list(dict.fromkeys(flips["judge"]))
    cats = list(dict.fromkeys(flips["category"]))
    styles = {**judge_styles(judges), **(styles or {})}
    if "all" in cats:
        cats = ["all"] + [c for c in cats if c != "all"]
    for judge, xs, rate in _judge_bars(ax, flips, "flip_rate", judges, cats, styles):
        # a measured zero has no bar: say "0" so it is not mistaken for "not measured"
        for xi in xs[rate == 0]:
            ax.text(xi, 0, "0", ha="center", va="bottom", fontsize=6.5, color=styles[judge][0], fontweight="bold")
    ax.axvline(0.5, color="#BBBBBB", linewidth=0.6) if "all" in cats and len(cats) > 1 else None
    _category_axis(fig, ax, ["all categories" if c == "all" else str(c) for c in cats], len(judges),
                   "Flip rate (% of replicate pairs that differ)", title or "Judge re-score noise by category")
    top = np.nanmax(np.concatenate([_pct(flips["hi"]), _pct(flips["flip_rate"])]))
    ax.set_ylim(0, max(1.0, float(top) * 1.15) if np.isfinite(top) else 1.0)
    return fig


@_paper_style
def agreement_matrix(pairs: pd.DataFrame, judges: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Pairwise Cohen's κ and Gwet's AC1 across judges as two annotated heat maps.

    `pairs`: columns a, b, cohen_kappa, gwet_ac1, n. Cells with no value stay blank.
    """
    fig = _new_figure((6.5, 3.6))
    if pairs.empty:
        return _empty(fig, "no judge pairs in this run")
    judges = list(judges) if judges else list(dict.fromkeys(list(pairs["a"]) + list(pairs["b"])))
    idx = {j: i for i, j in enumerate(judges)}
    axes = fig.subplots(1, 2)
    import matplotlib

    cmap = matplotlib.colormaps["cividis"].with_extremes(bad="#F2F2F2")
    im = None
    for ax, key, name in zip(axes, ("cohen_kappa", "gwet_ac1"), ("Cohen's κ", "Gwet's AC1")):
        m = np.full((len(judges), len(judges)), np.nan)
        for _, p in pairs.iterrows():
            if p["a"] in idx and p["b"] in idx and p.get(key) is not None and not pd.isna(p.get(key)):
                m[idx[p["a"]], idx[p["b"]]] = m[idx[p["b"]], idx[p["a"]]] = float(p[key])
        im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, vmin=0.0, vmax=1.0)
        for i in range(len(judges)):
            for k in range(len(judges)):
                if i == k:
                    ax.text(k, i, "—", ha="center", va="center", fontsize=8, color="#666666")
                elif not np.isnan(m[i, k]):
                    ax.text(k, i, f"{m[i, k]:.2f}", ha="center", va="center", fontsize=8,
                            color="black" if m[i, k] > 0.55 else "white")
        labels = [_short(j) for j in judges]
        ax.set_xticks(range(len(judges)), labels, rotation=35, ha="right")
        ax.set_yticks(range(len(judges)), labels if ax is axes[0] else [""] * len(judges))
        ax.set_title(name)
        for side in ax.spines.values():
            side.set_visible(False)
        ax.tick_params(length=0)
    assert im is not None  # drawn on each of the two axes
    fig.colorbar(im, ax=list(axes), shrink=0.8, label="Coefficient (colour clipped at 0)")
    fig.suptitle(title or "Pairwise agreement between judges", fontsize=9.5)
    return fig


def _short(name: str, width: int = 30) -> str:
    name = str(name)
    return name if len(name) <= width else name[: width - 1] + "…"


# ---------------------------------------------------------------------------------------
# paired fold differences


@_paper_style
def fold_differences(diffs: pd.DataFrame, paired: dict | None = None, title: str | None = None) -> Figure:
    """Per-fold paired differences targeted − global, one row per metric, in points.

    `diffs`: columns metric, difference (fraction; one row per held-out fold). `paired`:
    {metric: {"value", "lo", "hi", "nb_lo", "nb_hi"}} (`memjudge.reporting.frames.paired_intervals`), drawn as the
    mean with its percentile interval (thick) and Nadeau–Bengio interval (thin).
    """
    fig = _new_figure((6.5, 3.6))
    if diffs.empty:
        return _empty(fig, "no per-fold results in this run")
    ax = fig.add_subplot()
    _style(ax, grid="x")
    names = {"faithfulness": "Faithfulness", "retention": "Retention", "coverage": "Est. coverage"}
    metrics = [m for m in ("faithfulness", "retention", "coverage") if m in set(diffs["metric"])]
    metrics += [m for m in dict.fromkeys(diffs["metric"]) if m not in metrics]
    rng = np.random.default_rng(0)  # jitter only; fixed so the figure is reproducible
    paired = paired or {}
    for i, m in enumerate(metrics):
        d = _pct(diffs.loc[diffs["metric"] == m, "difference"].dropna())
        y = len(metrics) - 1 - i
        ax.scatter(d, y + rng.uniform(-0.25, 0.18, len(d)), s=9, color=PALETTE[i % len(PALETTE)], alpha=0.55,
                   linewidth=0, zorder=2, label=f"{names.get(m, m)}: per-fold (n={len(d)})")
        p = paired.get(m) or {}
        if p.get("value") is not None:
            mean = 100 * float(p["value"])
            # the two intervals on separate rows: the corrected one is often the narrower
            if p.get("lo") is not None and p.get("hi") is not None:
                ax.plot([100 * p["lo"], 100 * p["hi"]], [y + 0.40] * 2, color="#222222", linewidth=3.2, zorder=3,
                        solid_capstyle="butt")
            if p.get("nb_lo") is not None and p.get("nb_hi") is not None:
                ax.plot([100 * p["nb_lo"], 100 * p["nb_hi"]], [y + 0.29] * 2, color="#222222", linewidth=1.0,
                        marker="|", markersize=6, zorder=3)
            ax.plot([mean], [y + 0.345], marker="|", markersize=13, markeredgewidth=2.2, color=HIGHLIGHT, zorder=4)
    ax.axvline(0, color="#444444", linewidth=0.8, linestyle="--", zorder=1)
    ax.set_yticks(range(len(metrics)), [names.get(m, m) for m in reversed(metrics)])
    ax.set_ylim(-0.45, len(metrics) - 0.4)
    ax.set_xlabel("Targeted − global, per held-out fold (percentage points)")
    ax.set_title(title or "Paired fold differences (targeted − global)")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color="#222222", linewidth=3.2, label="2.5–97.5 percentile of fold differences"),
               Line2D([], [], color="#222222", linewidth=1.0, marker="|", markersize=6,
                      label="Nadeau–Bengio 95% interval"),
               Line2D([], [], color=HIGHLIGHT, marker="|", linestyle="", markersize=10, markeredgewidth=2.2,
                      label="mean")]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)
    return fig


# ---------------------------------------------------------------------------------------
# judge panels


@_paper_style
def panel_error_rates(errors: pd.DataFrame, title: str | None = None) -> Figure:
    """Each judge's sensitivity and specificity as a panel model estimated them (without gold),
    against the same measured on gold labels when there are any.

    `errors`: columns judge, measure ("sensitivity" | "specificity"), value, lo, hi (the
    estimate) and gold, gold_lo, gold_hi (measured; NaN without gold). With gold: estimated
    (y) against measured (x) with both intervals and the line y = x. Without gold: the
    estimates with their intervals, one row per judge.
    """
    fig = _new_figure((6.5, 3.4))
    if errors.empty:
        return _empty(fig, "no panel error rates in this run")
    axes = fig.subplots(1, 2)
    judges = list(dict.fromkeys(errors["judge"]))
    styles = judge_styles(judges)
    has_gold = errors["gold"].notna().any()
    for ax, measure in zip(axes, ("sensitivity", "specificity")):
        _style(ax, "both")
        d = errors[errors["measure"] == measure]
        if has_gold:
            vals = d[["value", "lo", "hi", "gold", "gold_lo", "gold_hi"]].to_numpy(dtype=float)
            finite = vals[np.isfinite(vals)]
            low = max(0.0, float(finite.min()) - 0.03) if finite.size else 0.0
            ax.plot([low, 1], [low, 1], color=NEUTRAL, linewidth=0.8, linestyle="--", label="estimate = measured")
            for r in d.itertuples(index=False):
                judge = str(r.judge)  # a judge_label string; the stubs type a row's fields as any scalar
                colour = styles[judge][0]
                ax.errorbar(r.gold, r.value, yerr=_yerr(r.value, r.lo, r.hi), xerr=_yerr(r.gold, r.gold_lo, r.gold_hi),
                            fmt=MARKERS[judges.index(judge) % len(MARKERS)], color=colour, ecolor=colour,
                            elinewidth=0.8, capsize=2, markersize=5, label=_short(judge))
            ax.set_xlim(low, 1.005)
            ax.set_ylim(low, 1.005)
            ax.set_xlabel(f"Measured {measure} (gold)")
            ax.set_ylabel(f"Estimated {measure} (no gold)")
        else:
            ys = np.arange(len(d))[::-1]
            for y, r in zip(ys, d.itertuples(index=False)):
                judge = str(r.judge)  # as above
                colour = styles[judge][0]
                ax.errorbar(r.value, y, xerr=_yerr(r.value, r.lo, r.hi), fmt=MARKERS[judges.index(judge) % len(MARKERS)],
                            color=colour, ecolor=colour, elinewidth=0.8, capsize=2, markersize=5)
            ax.set_yticks(ys, [_short(j, 24) for j in d["judge"]])
            ax.set_xlabel(f"Estimated {measure} (95% interval)")
            ax.set_xlim(max(0.0, float(np.nanmin(d["lo"].fillna(d["value"]))) - 0.05) if d["value"].notna().any() else 0, 1.005)
        ax.set_title(measure.capitalize())
    if has_gold:
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4), frameon=False)
    fig.suptitle(title or ("Judge error rates: panel estimate against gold" if has_gold else
                           "Judge error rates estimated by the panel (no gold)"), fontsize=9.5)
    return fig


# ---------------------------------------------------------------------------------------
# judge-corrected estimates (forest plot)

# One colour and marker per way of estimating, in this order top to bottom within a group.
FOREST_METHODS = {"judge_only": ("Judge only", PALETTE[1], "s"), "gold_only": ("Gold only", PALETTE[0], "o"),
                  "ppi": ("PPI++ (gold + judge)", PALETTE[2], "D")}


@_paper_style
def ppi_forest(est: pd.DataFrame, title: str | None = None) -> Figure:
    """Support rate per group estimated three ways, drawn one above the other with 95% intervals.

    `est`: one row per (group, method) with columns group, method (``judge_only``,
    ``gold_only``, ``ppi``), value, lo, hi (fractions; NaN where undefined, e.g. a group
    without gold) and label (the group's row label, e.g. with its gold count). Groups keep
    their order, top to bottom.
    """
    groups = list(dict.fromkeys(est["group"])) if not est.empty else []
    fig = _new_figure((6.5, min(8.0, 1.3 + 0.62 * max(1, len(groups)))))
    if est.empty or est["value"].notna().sum() == 0:
        return _empty(fig, "no judge-corrected estimates in this run")
    ax = fig.add_subplot()
    _style(ax, grid="x")
    labels = est.drop_duplicates("group").set_index("group")["label"] if "label" in est else pd.Series(groups, groups)
    offsets = {"judge_only": 0.22, "gold_only": 0.0, "ppi": -0.22}
    for m, (name, colour, marker) in FOREST_METHODS.items():
        sub = est[est["method"] == m].set_index("group").reindex(groups)
        y = len(groups) - 1 - np.arange(len(groups)) + offsets[m]
        v = _pct(sub["value"])
        ok = ~np.isnan(v)
        err = _yerr(v, _pct(sub["lo"]), _pct(sub["hi"]))
        ax.errorbar(v[ok], y[ok], xerr=err[:, ok], fmt=marker, color=colour, markersize=4.5, elinewidth=1.4,
                    capsize=2.5, label=name, zorder=3)
    for i in range(1, len(groups)):
        ax.axhline(len(groups) - i - 0.5, color="#E5E5E5", linewidth=0.6, zorder=1)
    ax.set_yticks(range(len(groups)), [str(labels.get(g, g)) for g in reversed(groups)])
    ax.set_ylim(-0.6, len(groups) - 0.4)
    ax.set_xlabel("Support rate (%), 95% intervals")
    ax.set_title(title or "Support rate: judge only, gold only and PPI++")
    fig.legend(loc="outside lower center", ncols=3, frameon=False)
    return fig
