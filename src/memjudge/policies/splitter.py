"""Persona-grouped repeated K-fold splits (spec §8), as a scikit-learn-style splitter object.

The recipe is exact, so folds reproduce across implementations: the groups are sorted (as
`numpy.unique` sorts them: persona ids as strings, integer codes numerically); for repeat
r in 0..R−1, ``perm = numpy.random.default_rng(seed + r).permutation(n_groups)`` and
``numpy.array_split(perm, K)`` are the held-out groups of folds 0..K−1. A group is never split
between the fit and the held-out side.

``RepeatedGroupKFold(n_splits=K, n_repeats=R, random_state=seed).split(groups)`` yields
``(train_indices, test_indices)`` per fold, repeat-major, like scikit-learn's splitters (whose
own ``GroupKFold`` assigns groups differently and is not used); ``group_folds(n_groups)``
yields the same folds as ``(repeat, fold, held-out group codes)``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from memjudge.errors import UsageError


class RepeatedGroupKFold:
    """R repeats of K folds over groups (personas); see the module docstring for the recipe."""

    def __init__(self, n_splits: int = 5, n_repeats: int = 20, random_state: int = 0):
        if n_splits < 2:
            raise UsageError("--folds must be at least 2 (each fold is held out while the rest fit)")
        if n_repeats < 1:
            raise UsageError(f"--repeats must be at least 1, got {n_repeats}")
        self.n_splits = int(n_splits)
        self.n_repeats = int(n_repeats)
        self.random_state = int(random_state)

    def get_n_splits(self, X=None, y=None, groups=None) -> int:
        return self.n_splits * self.n_repeats

    def group_folds(self, n_groups: int) -> Iterator[tuple[int, int, np.ndarray]]:
        """(repeat, fold, held-out group codes) for group codes 0..n_groups−1."""
        if self.n_splits > n_groups:
            raise UsageError(f"--folds {self.n_splits} exceeds the number of personas ({n_groups})")
        for r in range(self.n_repeats):
            perm = np.random.default_rng(self.random_state + r).permutation(n_groups)
            for k, held in enumerate(np.array_split(perm, self.n_splits)):
                yield r, k, held

    def split(self, X=None, y=None, groups=None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(train indices, test indices) of the items, per fold; `groups` labels each item
        (also accepted as the first argument: ``split(groups)``)."""
        if groups is None:
            groups = X
        if groups is None:
            raise UsageError("RepeatedGroupKFold.split needs the groups (one label per item)")
        uniq, codes = np.unique(np.asarray(groups), return_inverse=True)
        for _, _, held in self.group_folds(len(uniq)):
            test_groups = np.zeros(len(uniq), bool)
            test_groups[held] = True
            test = test_groups[codes]
            yield np.flatnonzero(~test), np.flatnonzero(test)


def fold_assignment(n_personas: int, repeats: int, folds: int, seed: int) -> list[tuple[int, int, np.ndarray]]:
    """[(repeat, fold, held-out persona codes)] exactly as spec §8 (`RepeatedGroupKFold`)."""
    return list(RepeatedGroupKFold(folds, repeats, seed).group_folds(n_personas))


__all__ = ["RepeatedGroupKFold", "fold_assignment"]
