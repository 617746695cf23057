"""Lazy package exports (PEP 562): a name is imported from its module on first use.

A package whose `__init__` re-exports from heavy modules (the engine, pandas) uses this so that
importing one of its light leaf modules loads nothing else. The package root `memjudge` keeps
its own copy: it must import nothing at all (tests/test_architecture.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, modules: Mapping[str, str],
            namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`: each name in `modules` (name → module path)
    is imported on first use and then kept in the package's `namespace` (its globals())."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(modules))

    return __getattr__, __dir__
