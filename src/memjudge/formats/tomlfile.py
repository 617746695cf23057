"""TOML files of memjudge's own (judge panels, generator overrides, column mappings, memory-system
presets), read with the standard library's tomllib; a bad one is one line naming the file."""

from __future__ import annotations

from pathlib import Path

from memjudge.errors import InputError

__all__ = ["read_toml"]


def read_toml(path) -> dict:
    """A TOML file (judge panels, generator overrides) as a dict; one-line InputError otherwise."""
    import tomllib

    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such file" if not path.exists() else "is a directory, expected a file")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(path, f"not valid TOML ({e})") from None
