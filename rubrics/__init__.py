"""Rubric files (templates + answer schemas), installed as the package `memjudge._rubrics`.

Data, not code: `memjudge.rubrics` loads `*.toml` from here with importlib.resources.
"""
