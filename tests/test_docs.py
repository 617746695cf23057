"""The manual's pages (docs/*.md) keep their examples true (issue #33).

Each page's code blocks run in its order in a fresh folder (one test per page, so pytest-xdist
spreads them), as tests/doc_blocks.py describes; blocks tagged `model` run in one `model`-marked
test. Every page is also checked for what the README is: fences that say what they are, Python
examples on the public API only, dotted names that resolve, and a place in mkdocs.yml's nav.
"""

from __future__ import annotations

import re

import pytest

from conftest import clone_answers
from doc_blocks import (
    MODEL_TAG,
    ROOT,
    blocks_of,
    check_declared,
    check_dotted_names,
    check_public_api,
    env_for,
    manual_pages,
    model_installed,
    run_block,
    workdir,
)

PAGES = manual_pages()
IDS = [p.name for p in PAGES]


def test_the_manual_has_its_pages():
    names = {p.name for p in PAGES}
    for page in ("index.md", "scoring.md", "servers.md", "agreement.md", "panels.md", "policies.md", "gate.md",
                 "simulation.md", "local-judge.md", "estimates.md", "annotate.md", "batch.md", "real-data.md",
                 "formats.md", "cli.md", "api.md"):
        assert page in names, f"docs/{page} is missing"


def test_every_page_is_in_the_nav():
    """mkdocs build --strict refuses a page outside the nav too; this says which, without building."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r":\s*([\w./-]+\.md)\s*$", nav, re.M))
    assert {p.name for p in PAGES} == listed, (
        f"docs/*.md and mkdocs.yml's nav differ: not listed {sorted({p.name for p in PAGES} - listed)}, "
        f"listed but missing {sorted(listed - {p.name for p in PAGES})}")


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_blocks_declare_what_they_are(page):
    check_declared(blocks_of(page))


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_python_examples_use_only_the_public_api(page):
    check_public_api(blocks_of(page))


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_dotted_names_in_the_prose_exist(page):
    check_dotted_names(page)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("page", [p for p in PAGES if any(b.runs for b in blocks_of(p))],
                         ids=[p.name for p in PAGES if any(b.runs for b in blocks_of(p))])
def test_page_examples_run_as_written(page, tmp_path):
    work = workdir(tmp_path)
    env = env_for(tmp_path)
    for block in blocks_of(page):
        if block.runs:
            run_block(block, work, env)


@pytest.mark.model
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not model_installed(), reason="the [local] extra is not installed")
def test_model_examples_run_as_written(tmp_path, model_demo, packaged_model):
    """Each page's `model` blocks, after that page's first runnable block (the corpus they read).

    They start from a copy of the session demo's answer cache (tests/conftest.py, `model_demo`):
    the page's `memjudge demo --personas 2` is that very run, which tests/test_demo.py checks
    from an empty cache; here it must run as written, and its answers need not be asked twice
    (about 4 minutes). Everything else the blocks ask (other corpora, other thresholds) is asked
    of the real model."""
    assert model_demo.result.returncode == 0, model_demo.result.stderr
    cache = clone_answers(model_demo.cache, tmp_path / "memjudge-cache", packaged_model)
    ran = 0
    for page in PAGES:
        blocks = blocks_of(page)
        model_blocks = [b for b in blocks if MODEL_TAG in b.tags]
        if not model_blocks:
            continue
        (tmp_path / page.stem).mkdir()
        work = workdir(tmp_path / page.stem)
        env = {**env_for(tmp_path / page.stem), "MEMJUDGE_CACHE_DIR": str(cache)}
        run_block(next(b for b in blocks if b.runs), work, env)
        for block in model_blocks:
            run_block(block, work, env)
            ran += 1
    assert ran, "no page has a block tagged model"
