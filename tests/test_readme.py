"""The README's examples run as written (issue #19 item 14; #14: Python examples use the public API;
#33: the README is the five-minute tour, the manual is docs/ and tests/test_docs.py runs its pages).

The conventions of the blocks (languages, the tags key/server/person/install/data/model, the fresh
folder they run in) are in tests/doc_blocks.py's docstring.
"""

from __future__ import annotations

import re

import pytest

from doc_blocks import (
    MODEL_TAG,
    README,
    ROOT,
    blocks_of,
    check_declared,
    check_dotted_names,
    check_public_api,
    env_for,
    model_installed,
    run_block,
    workdir,
)

QUICKSTART = "memjudge simulate --preset paper --out runs/sim"
MAX_LINES = 300


def test_every_block_declares_what_it_is():
    blocks = blocks_of(README)
    assert blocks, "no fenced blocks in README.md"
    check_declared(blocks)
    runnable = [b for b in blocks if b.runs]
    # The tour comes first and every later example reads its files.
    assert runnable[0].code.strip().splitlines()[0].split("#")[0].strip() == QUICKSTART


def test_python_examples_use_only_the_public_api():
    check_public_api(blocks_of(README))


def test_dotted_names_in_the_prose_exist():
    check_dotted_names(README)


def test_the_readme_is_short_and_points_into_the_manual():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES, f"README.md is {len(text.splitlines())} lines (at most {MAX_LINES})"
    for target in re.findall(r"\]\((docs/[^)#\s]+)", text):
        assert (ROOT / target).exists(), f"README.md links {target}, which does not exist"


def test_the_readmes_test_command_is_the_one_ci_runs():
    """The README's "install and run the tests" block is .ci/run's command, word for word."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    i = next((i for i, line in enumerate(lines) if 'pip install -e ".[test' in line and not line.startswith("#")), None)
    assert i is not None, '.ci/run has no `pip install -e ".[test...` command'
    command = lines[i]
    while command.endswith("\\"):
        i += 1
        command = command[:-1].rstrip() + " " + lines[i].strip()
    installs = [b.code.strip() for b in blocks_of(README) if "install" in b.tags]
    assert command in installs, f"README.md has no install block with .ci/run's command:\n{command}"


@pytest.mark.timeout(1800)  # about 1 min of CPU; minutes of wall time on a shared machine
def test_readme_examples_run_as_written(tmp_path):
    work = workdir(tmp_path)
    env = env_for(tmp_path)
    ran = 0
    for block in blocks_of(README):
        if block.runs:
            run_block(block, work, env)
            ran += 1
    assert ran >= 6, f"only {ran} README blocks ran"
    # What the tour promises to leave behind.
    for path in ("runs/sim/candidates.jsonl", "runs/sim-paper/labels.jsonl", "runs/sim-paper/noise.json",
                 "runs/sim-paper/compare.json", "runs/sim-paper/report.md", "runs/sim-paper/report.html"):
        assert (work / path).is_file(), f"{path} was not written"


@pytest.mark.model
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not model_installed(), reason="the [local] extra is not installed")
def test_readme_model_examples_run_as_written(tmp_path):
    """The blocks tagged `model`, after the tour's first block (the corpus they read)."""
    blocks = blocks_of(README)
    model_blocks = [b for b in blocks if MODEL_TAG in b.tags]
    if not model_blocks:
        pytest.skip("the README has no model block (the manual's are run by tests/test_docs.py)")
    work = workdir(tmp_path)
    env = env_for(tmp_path)
    run_block(next(b for b in blocks if b.runs), work, env)
    for block in model_blocks:
        run_block(block, work, env)


RECIPE = ". install/llama-cpp.env"  # llama-cpp-python's build flags, in one file (issue 54)


def _sourced_cmake_args() -> str:
    import subprocess

    env = {"PATH": "/usr/bin:/bin"}  # no CMAKE_ARGS of the caller's
    return subprocess.run(["bash", "-c", f'{RECIPE} && printf %s "$CMAKE_ARGS"'], cwd=ROOT, env=env, text=True,
                          capture_output=True, check=True).stdout


def test_the_readme_and_ci_build_llama_cpp_the_same_way():
    """One recipe: every command of the README and the manual that installs the [local] extra, and
    .ci/run, source install/llama-cpp.env before pip builds llama-cpp-python; neither sets
    CMAKE_ARGS itself; the file's flags are the ones memjudge doctor gives in its rebuild."""
    from doc_blocks import DOCS
    from memjudge.judges.local_runtime import RECIPE_CMAKE_ARGS

    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    code = [line for line in ci.splitlines() if not line.lstrip().startswith("#")]
    assert not any("CMAKE_ARGS" in line for line in code), ".ci/run sets CMAKE_ARGS itself"
    blocks = [b.code for b in blocks_of(README) if "install" in b.tags]
    blocks += [b.code for page in sorted(DOCS.glob("*.md")) for b in blocks_of(page) if "install" in b.tags]
    ci_command = next(line for line in code if "pip install -e" in line)
    local_installs = [line for text in [*blocks, ci_command] for line in text.splitlines()
                      if re.search(r'pip install -e "\.\[[^\]]*local', line)]
    assert len(local_installs) >= 3, local_installs  # the README's two, the manual's, .ci/run's
    for line in local_installs:
        assert RECIPE in line and line.index(RECIPE) < line.index("pip install"), f"not built by the recipe: {line}"
        assert "CMAKE_ARGS" not in line
    assert _sourced_cmake_args() == RECIPE_CMAKE_ARGS
