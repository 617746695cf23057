"""Interval validation (the quick version of bench/intervals.py): in simulated studies with
a known generative process, memjudge's 95% persona-cluster bootstrap intervals for the support
rate, the flip rate and Cohen's κ cover the population value about 95% of the time, while
intervals that ignore persona clustering fall short."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location("bench_intervals", Path(__file__).resolve().parents[1] / "bench" / "intervals.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_population_values_match_a_large_sample():
    """The closed-form truths are right: ~470,000 candidates land on them."""
    for scenario in ("moderate", "heavy"):
        labels, gold = bench.study(np.random.default_rng(0), 10000, scenario)
        truth = bench.population_values(scenario)
        for k, (lo, hi) in bench.naive_interval(labels, gold).items():
            assert abs((lo + hi) / 2 - truth[k]) < 0.006, (scenario, k, (lo + hi) / 2, truth[k])


def test_cluster_bootstrap_intervals_cover_the_truth():
    res = bench.run(studies=60, personas=100, B=500, seed=11, naive=False, scenario="moderate")
    for k, c in res["coverage"].items():
        assert c >= 0.88, (k, c)


def test_naive_intervals_undercover_under_clustering():
    truth = bench.population_values("heavy")["support_rate"]
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(100):
        labels, gold = bench.study(rng, 100, "heavy")
        lo, hi = bench.naive_interval(labels, gold)["support_rate"]
        hits += lo <= truth <= hi
    assert hits / 100 < 0.88
