"""Shared fixtures: no test may reach a real service, and no test writes outside tmp."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = ROOT / "tests" / "data"
# CI clones the project beside shared/; a user's clone has none (those tests skip).
SHARED_DATA = Path(os.environ.get("MEMJUDGE_SHARED_DATA", ROOT.parent / "shared" / "data"))

_PROVIDER_ENV = (
    "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "OPENAI_API_KEY", "OPENAI_BASE_URL",
    "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
    "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION",
)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path_factory):
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMJUDGE_NO_DOTENV", "1")
    monkeypatch.setenv("MEMJUDGE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("MPLBACKEND", "Agg")


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


# MEMJUDGE_TEST_FRESH_CLI=1: every run_cli in a new interpreter, as before the forkserver (to
# rule it out when a CLI test behaves oddly, or to measure what it saves).
FRESH_CLI = bool(os.environ.get("MEMJUDGE_TEST_FRESH_CLI"))


def run_cli(*args: str, env: dict | None = None, cwd=None, timeout: float = 600, fresh: bool = False):
    """Run `python -m memjudge ARGS`; returns CompletedProcess (text).

    The command runs in a child of a warm forkserver (tests/cli_runner.py: its own process,
    environment, folder and exit status, without re-importing pandas each time). `fresh=True`,
    or an env that sets a PYTHON* variable, runs a new interpreter instead: for what start-up
    itself does."""
    import subprocess

    full_env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_ENV}
    full_env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + full_env.get("PYTHONPATH", "")
    # A developer's .env must not put real keys back into a test (tests of .env unset this).
    full_env["MEMJUDGE_NO_DOTENV"] = "1"
    full_env.update(env or {})
    full_env = {k: v for k, v in full_env.items() if v is not None}  # env={"X": None} unsets X
    argv = [sys.executable, "-m", "memjudge", *map(str, args)]
    if fresh or FRESH_CLI or any(k.startswith("PYTHON") and k != "PYTHONPATH" for k in env or {}):
        return subprocess.run(argv, capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout)
    return _forked(argv, full_env, cwd, timeout)


def _forked(argv: list[str], env: dict, cwd, timeout: float):
    import subprocess
    import tempfile

    import cli_runner

    with tempfile.TemporaryDirectory(prefix="memjudge-cli-") as tmp:
        out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        # The command runs at its test's priority (see pytest_runtest_setup), not at the forkserver's.
        p = forkserver().Process(target=cli_runner.run, args=(argv[3:], env, None if cwd is None else str(cwd), out, err),
                                 kwargs={"nice": os.getpriority(os.PRIO_PROCESS, 0)})
        p.start()
        timed_out = False
        try:
            p.join(timeout)
            timed_out = p.exitcode is None
        finally:  # also when pytest-timeout interrupts the join: no command outlives its test
            if p.exitcode is None:
                p.kill()
                p.join()
        if timed_out:
            raise subprocess.TimeoutExpired(argv, timeout)
        return subprocess.CompletedProcess(argv, p.exitcode, _text(out), _text(err))


def _text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:  # the child died before the command began (its error is in the test's output)
        return ""


def forkserver():
    """The multiprocessing context whose server has cli_runner.PRELOAD imported (one per test
    process; the kill loop of test_engine.py forks its children from it too)."""
    import multiprocessing

    import cli_runner

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(cli_runner.PRELOAD)
    return ctx


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def fake_server():
    """A running fake Gemini/OpenAI server on 127.0.0.1 (tests/fake_server.py)."""
    from fake_server import FakeServer

    with FakeServer() as server:
        yield server


# ---------------------------------------------------------------------------------------
# organisation of the suite under pytest-xdist (tests/README.md)


def pytest_itemcollected(item):
    """Every `model` test joins the xdist group "model": with `--dist loadgroup` (pyproject's
    addopts) one worker runs them one after another, so two model runs never compete for the two
    cores, while the other worker takes the CPU-light rest. (At each item's collection, so the
    marker is there before any pytest_collection_modifyitems runs, whatever their order: xdist's
    turns the groups into node ids, which then end in "@model".)"""
    if item.get_closest_marker("model") is not None and item.get_closest_marker("xdist_group") is None:
        item.add_marker(pytest.mark.xdist_group("model"))


# What each test took in a recent full run (setup + call + teardown, seconds; tests under a
# tenth of a second left out; xdist's grouped node ids end in "@GROUP"): written by
# `python -m pytest --write-durations tests/durations.json`.
DURATIONS = ROOT / "tests" / "durations.json"


def pytest_addoption(parser):
    parser.addoption("--write-durations", metavar="FILE", default=None,
                     help="write each test's duration (setup+call+teardown) to FILE as JSON, for the run order "
                          "(tests/durations.json)")


def pytest_collection_modifyitems(config, items):
    """The CPU-light tests' modules in order of their total time, the longest first
    (tests/durations.json; modules it does not know keep their place after them), each module's
    tests in their own order (its module-scoped fixtures, such as one browser, are then set up
    once per worker). xdist hands out tests in this order a few at a time, so a long module
    collected last would keep one worker busy while the other has nothing left to do. The
    `model` tests keep the order they were collected in: they run as one group on one worker
    (their order there was measured: the demo first, the llama.cpp server after the CPU-light
    lane has mostly finished). The order is a function of the collection alone, the same on
    every worker, as xdist requires."""
    import json

    try:
        seconds = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return
    modules: dict[str, float] = {}
    for nodeid, s in seconds.items():
        if nodeid.endswith("@model"):  # the model group (xdist's node id "...@model"): not in the CPU-light lane
            continue
        module = nodeid.split("::", 1)[0]
        modules[module] = modules.get(module, 0.0) + s
    model = [i for i in items if i.get_closest_marker("model") is not None]
    light = [i for i in items if i.get_closest_marker("model") is None]
    light.sort(key=lambda item: -modules.get(item.nodeid.split("::", 1)[0], 0.0))  # stable within a module
    items[:] = model + light


# The model tests set the suite's length: they run one after another on one worker and, alone,
# use about 1.3 of the 2 cores. llama.cpp's threads wait for each other at every layer, so a light
# test that takes half of one core from a thread at equal priority slows the whole evaluation by up
# to half. So while the model lane runs, a light test runs at nice LIGHT_NICE: it gets every cycle
# the model lane leaves (its second thread sleeps between evaluations; the Python work in between
# uses one core) and about a tenth of a core the model wants (weight 110 against 1,024). Not 19:
# beside other users' jobs on a shared machine the light lane would then all but stop. Niceness
# belongs to each thread (a child takes its parent thread's), so every thread of the worker is
# reniced at each test's setup; a model test takes its worker back to 0, which needs CAP_SYS_NICE
# (root, as in CI): without it a worker keeps the niceness it reached, and only a worker that ran a
# light test before its model tests loses the priority (loadgroup hands the model group out first).
# MEMJUDGE_TEST_EQUAL_PRIORITY=1 turns it off.
LIGHT_NICE = 10


def _renice(nice: int) -> None:
    for tid in os.listdir("/proc/self/task"):
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
        except (PermissionError, ProcessLookupError):  # lowering needs CAP_SYS_NICE; a thread may have ended
            pass


def _model_lane(session) -> bool:
    """Whether this run has model tests (not the fast lane, `-m "not model"`): only then do the
    light tests yield, so that the fast lane keeps its full share of a machine shared with others."""
    if not hasattr(session, "_memjudge_model_lane"):
        session._memjudge_model_lane = model_installed() and any(
            i.get_closest_marker("model") is not None for i in session.items)
    return session._memjudge_model_lane


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # tryfirst: before fixtures are set up, so a model test's session fixture (the demo) and the
    # servers and commands it starts run at the model's priority.
    if sys.platform == "linux" and not os.environ.get("MEMJUDGE_TEST_EQUAL_PRIORITY") and _model_lane(item.session):
        _renice(0 if item.get_closest_marker("model") is not None else LIGHT_NICE)


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report):
    # Under xdist the workers' reports reach the controller too, so this sees every test once.
    _measured[report.nodeid] = _measured.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session):
    import json

    path = session.config.getoption("--write-durations", None)
    if path and not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        kept = {k: round(v, 2) for k, v in sorted(_measured.items(), key=lambda kv: -kv[1]) if v >= 0.1}
        Path(path).write_text(json.dumps(kept, indent=0) + "\n")


def pytest_collection_finish(session):
    """On an xdist worker with --dist loadgroup, the groups must be in the node ids (that is all
    the scheduler reads); a pytest that xdist cannot mark (9.2 with xdist 3.8) would let the model
    tests run on both workers at once and double the suite's time without a word. (Raised on a
    worker, xdist shows it as an INTERNALERROR at collection: loud, if not pretty.)"""
    if not getattr(session.config.option, "loadgroup", False):
        return
    ungrouped = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if ungrouped:
        raise pytest.UsageError(f"pytest-xdist did not apply its groups ({len(ungrouped)} tests, e.g. {ungrouped[0]}): "
                                f"pytest {pytest.__version__} with this pytest-xdist; see pyproject's pin of pytest")


# ---------------------------------------------------------------------------------------
# the embedded model, shared by the tests marked `model`


def model_installed() -> bool:
    """llama-cpp-python and the packaged model's weight packages (the [local] extra)."""
    import importlib.util

    from memjudge.judges import local_weights as W

    if importlib.util.find_spec("llama_cpp") is None:
        return False
    return all(importlib.util.find_spec(p) is not None for p in W.PACKAGED[W.DEFAULT_MODEL].packages)


@pytest.fixture(scope="session")
def packaged_model(tmp_path_factory) -> Path:
    """The packaged model's GGUF file, joined from its packages and verified (sha256) once per
    test session: 1.1 GB that each model test would otherwise join and hash again."""
    from memjudge.judges import local_weights as W
    from memjudge.judges.local_runtime import repack_decision

    if not model_installed():
        pytest.skip("the [local] extra is not installed")
    folder = tmp_path_factory.mktemp("packaged-model")
    path = W.packaged_model_path(W.DEFAULT_MODEL, cache_dir=folder)
    # The llama.cpp self-test once per session (a model load in a child, seconds), remembered in
    # `folder/selftest`, which model_cache_dir copies into each test's cache folder.
    repack_decision(path, cache_dir=folder)
    return path


def model_cache_dir(folder: Path, model: Path) -> Path:
    """`folder` made a memjudge cache folder (MEMJUDGE_CACHE_DIR) with no answers that already
    holds the verified model: hard links to `model` and its marker (the marker records size and
    mtime, which a link shares), a copy where links cannot be made."""
    import shutil

    models = folder / "models"
    models.mkdir(parents=True, exist_ok=True)
    for f in (model, model.with_name(model.name + ".verified.json")):
        try:
            os.link(f, models / f.name)
        except OSError:
            shutil.copy2(f, models / f.name)
    selftest = model.parent.parent / "selftest"  # the session's remembered llama.cpp self-test
    if selftest.is_dir():
        shutil.copytree(selftest, folder / "selftest", dirs_exist_ok=True)
    return folder


@pytest.fixture
def model_home(packaged_model, tmp_path) -> Path:
    """A fresh memjudge cache folder for one test, holding the verified packaged model."""
    return model_cache_dir(tmp_path / "memjudge-cache", packaged_model)


@dataclasses.dataclass(frozen=True)
class DemoRun:
    out: Path  # the run folder
    cache: Path  # its MEMJUDGE_CACHE_DIR: the model and every answer the run asked for
    result: object  # subprocess.CompletedProcess of the command
    argv: tuple[str, ...]


DEMO_ARGS = ("demo", "--personas", "2", "--no-progress")  # the README's smaller demo


@pytest.fixture(scope="session")
def model_demo(packaged_model, tmp_path_factory) -> DemoRun:
    """`memjudge demo --personas 2` with the real model, once per session, from an empty answer
    cache: tests/test_demo.py checks it (and its cached rerun), and the README's `model` block
    that runs the same command reads a copy of its cache instead of scoring it all again."""
    folder = tmp_path_factory.mktemp("model-demo")
    cache = model_cache_dir(folder / "cache", packaged_model)
    out = folder / "demo"
    argv = (*DEMO_ARGS, "--out", str(out))
    # About 4 minutes on two idle cores; the limit only catches a hang on a shared machine.
    r = run_cli(*argv, env={"MEMJUDGE_CACHE_DIR": str(cache)}, timeout=3000)
    return DemoRun(out=out, cache=cache, result=r, argv=argv)


def clone_answers(cache: Path, folder: Path, model: Path) -> Path:
    """A copy of the answer cache `cache` in `folder`, with the model linked (model_cache_dir)."""
    import shutil

    shutil.copytree(cache, folder, ignore=lambda d, names: ["models"] if Path(d) == cache else [])
    return model_cache_dir(folder, model)


# ---------------------------------------------------------------------------------------
# the browser: the system Chromium driven by Playwright (never `playwright install`)

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium phones home, and on a closed network its
# connections are refused; none of these flags changes how the page behaves.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per test module, shared by its tests: give each test its own page
    (`browser.new_page()`). Module scope: Playwright's sync API and its event loop end with
    the module that used them, before other modules' `asyncio.run`. Skipped only when
    /usr/bin/chromium is absent; CI installs it (.ci/run) and sets MEMJUDGE_REQUIRE_CHROMIUM=1,
    which turns the skip into a failure."""
    if not CHROMIUM.exists():
        if os.environ.get("MEMJUDGE_REQUIRE_CHROMIUM"):
            pytest.fail(f"{CHROMIUM} is absent but MEMJUDGE_REQUIRE_CHROMIUM is set (CI must run the browser tests)")
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium; .ci/run does)")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=30_000)  # a loaded 2-core machine; waits end as soon as the page is there
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()
