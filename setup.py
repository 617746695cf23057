"""Only what pyproject.toml cannot say: the packages under src/ are found automatically and the
top-level rubrics/ folder (spec §1: rubrics are data beside the code) ships as the package
`memjudge._rubrics`, read with importlib.resources."""

from setuptools import find_packages, setup

setup(
    packages=find_packages("src") + ["memjudge._rubrics"],
    package_dir={"": "src", "memjudge._rubrics": "rubrics"},
)
