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


class _Module:
    """A stand-in for a module that imports it on first attribute use (`module`)."""

    def __init__(self, name: str):
        self._name = name
        self._module: Any = None

    def __getattr__(self, attr: str) -> Any:
        module = self.__dict__["_module"]
        if module is None:
            module = self.__dict__["_module"] = importlib.import_module(self.__dict__["_name"])
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def module(name: str) -> Any:
    """`name`, imported when one of its attributes is first used: a provider's SDK costs a
    fully cached run nothing (the openai package alone takes about 0.4 s to import), and is
    loaded by the first request. Type checkers should see the real import (under
    ``TYPE_CHECKING``)."""
    return _Module(name)
