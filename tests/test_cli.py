"""The command line as a newcomer meets it: version, help for every option, keys from .env,
a confirmation before paid answers are deleted, report --open, a dry run without a key."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from memjudge import __version__


def test_version(cli):
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"memjudge {__version__}"
    # the same from a new interpreter: `python -m memjudge` itself (run_cli otherwise forks a warm one)
    fresh = cli("--version", fresh=True)
    assert (fresh.returncode, fresh.stdout, fresh.stderr) == (r.returncode, r.stdout, r.stderr)


def _options_without_help(parser):
    import argparse

    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += [f"{name} {m}" for m in _options_without_help(sub)]
        elif action.help is None and action.dest not in ("help",):
            missing.append("/".join(action.option_strings) or action.dest)
    return missing


def test_every_option_has_help():
    from memjudge.cli import build_parser

    assert _options_without_help(build_parser()) == []


def test_help_lists_what_can_be_chosen(cli):
    from memjudge.importers import available
    from memjudge.simulation import preset_names
    from memjudge.stats.thresholds import TARGETS

    assert all(t in cli("calibrate", "--help").stdout for t in TARGETS)
    assert all(d in cli("import", "--help").stdout for d in available())
    assert all(p in cli("simulate", "--help").stdout for p in preset_names())
    out = cli("batch", "--help").stdout
    assert "status" in out and "cancel" in out and "cancel a run's open batch jobs" in out


def test_the_light_registry_names_what_the_implementations_accept():
    """The help reads `memjudge._util.registry` (no pandas); the implementations read it too,
    or (calibration targets, until stats.thresholds reads it) agree with it exactly."""
    from memjudge._util import registry
    from memjudge.importers import available
    from memjudge.simulation import preset_names
    from memjudge.stats.thresholds import TARGETS

    assert tuple(TARGETS) == registry.CALIBRATION_TARGETS
    assert sorted(registry.dataset_names()) == available()
    assert preset_names() == registry.preset_names() and "paper" in preset_names()


def test_dotenv_in_the_working_folder_is_read_and_the_environment_wins(cli, tmp_path):
    (tmp_path / ".env").write_text(f"MEMJUDGE_CACHE_DIR={tmp_path / 'from-dotenv'}\n")
    before = (tmp_path / ".env").read_bytes()
    r = cli("cache", "stats", "--json", cwd=tmp_path, env={"MEMJUDGE_NO_DOTENV": None, "MEMJUDGE_CACHE_DIR": None})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["directory"] == str(tmp_path / "from-dotenv")
    r = cli("cache", "stats", "--json", cwd=tmp_path, env={"MEMJUDGE_NO_DOTENV": None, "MEMJUDGE_CACHE_DIR": str(tmp_path / "env")})
    assert json.loads(r.stdout)["directory"] == str(tmp_path / "env")
    assert (tmp_path / ".env").read_bytes() == before  # never written


def test_cache_clear_asks_on_a_terminal(tmp_path):
    """Run under a pseudo-terminal: 'n' keeps the answers, 'y' deletes them."""
    import pty
    import subprocess

    from memjudge.scoring.cache import AnswerCache

    d = tmp_path / "cache"
    with AnswerCache(d) as c:
        c.set("a" * 64, {"answer": {}})

    def run(reply: str):
        master, slave = pty.openpty()
        env = {**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(__file__), "..", "src")}
        p = subprocess.Popen([sys.executable, "-m", "memjudge", "cache", "clear", "--cache-dir", str(d)],
                             stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        out = b""
        while b"[y/N]" not in out:
            out += os.read(master, 1024)
        os.write(master, reply.encode() + b"\n")
        code = p.wait(timeout=60)
        try:
            while chunk := os.read(master, 1024):
                out += chunk
        except OSError:
            pass
        os.close(master)
        return code, out.decode()

    code, out = run("n")
    assert code == 2 and "nothing deleted" in out
    with AnswerCache(d) as c:
        assert c.stats()["entries"] == 1
    code, out = run("y")
    assert code == 0 and "removed 1 answers" in out


def test_report_open_opens_the_html_in_a_browser(cli, tmp_path):
    from pathlib import Path

    fixture = Path(__file__).parent / "data" / "report_run"
    run = tmp_path / "run"
    import shutil

    shutil.copytree(fixture, run)
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    browser.chmod(browser.stat().st_mode | stat.S_IEXEC)
    r = cli("report", run, "--open", env={"BROWSER": str(browser)})
    assert r.returncode == 0, r.stderr
    assert opened.read_text().strip() == (run / "report.html").resolve().as_uri()


@pytest.mark.parametrize("spec,var", [("openai:gpt-4o-mini", "OPENAI_API_KEY"), ("gemini:gemini-2.5-flash", "GEMINI_API_KEY")])
def test_dry_run_needs_no_key_and_a_real_run_says_which_key(cli, tmp_path, spec, var):
    cand = tmp_path / "c.jsonl"
    src = tmp_path / "s.jsonl"
    cand.write_text('{"persona_id": "p", "assertion_id": "a1", "category": "work", "confidence": 0.9, "text": "Works as a nurse."}\n')
    src.write_text('{"persona_id": "p", "source": "I work night shifts as a nurse."}\n')
    r = cli("score", cand, "--sources", src, "--judge", spec, "--dry-run", "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    assert "dry run: 1 calls" in r.stdout
    r = cli("score", cand, "--sources", src, "--judge", spec, "--out", tmp_path / "run", "--no-progress")
    assert r.returncode == 2 and var in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_program_entry_exits_with_mains_status():
    """`memjudge` (the console script) and `python -m memjudge` run `memjudge.cli.run`: main's
    status becomes the process's, its output is all there, and the collector frozen on the way
    out loses nothing."""
    import subprocess

    code = "import sys; sys.argv = ['memjudge', *sys.argv[1:]]; from memjudge.cli import run; run()"
    ok = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "score" in ok.stdout
    bad = subprocess.run([sys.executable, "-c", code, "score", "missing.jsonl", "--sources", "missing.jsonl", "--judge", "nope:x"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip() and "Traceback" not in bad.stderr
