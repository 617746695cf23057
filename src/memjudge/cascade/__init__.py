"""Certified cascades (spec §14): the cheapest judge first, trusted only where it is sure
enough, the rest escalated; thresholds certified on gold items by fixed-sequence testing
(the mathematics: memjudge.stats.cascade). `run_cascade` is what `memjudge cascade` runs."""

from memjudge.cascade.run import CASCADE_FILE, QUEUE_FILE, CascadeResult, cascade_name, run_cascade
from memjudge.cascade.stages import Stage, make_stages

__all__ = ["CASCADE_FILE", "QUEUE_FILE", "CascadeResult", "Stage", "cascade_name", "make_stages", "run_cascade"]
