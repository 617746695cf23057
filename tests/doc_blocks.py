"""The fenced code blocks of the README and of the manual's pages (docs/*.md), and how a test runs them.

Every fenced block opens with a language (`bash`, `python`, `toml`, `text`, `json`): illustrative
output and formats are `text`/`json`/`toml` and are not run. A `bash` or `python` block runs
unless a tag after the language says why it cannot run here:

    key      calls a provider (Gemini, OpenAI): needs an API key and the network
    server   needs a running OpenAI-compatible server (vLLM, Ollama, llama.cpp)
    person   needs a person (labels in the browser or in Label Studio)
    install  installs the project or runs this test suite (it would recurse)
    data     needs a full public data set from ../shared/data (a shipped sample runs instead)
    model    needs the embedded model (the [local] extra): run by the `model`-marked tests

A file's blocks run in its order in one fresh temporary folder, as a reader pastes them from the
root of a clone: files written by one block are read by later ones. The folder starts with a
copy of the clone's `examples/` (scripts and the small `examples/data/`), nothing else. Shell
blocks run in bash (`-e -o pipefail`) and Python blocks in the project's interpreter, with the
virtual environment's `bin` (its `memjudge` and `python`) first on PATH, no provider keys and an
empty answer cache. A non-zero exit fails the test with the block, its line and its stderr.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent

LANGUAGES = {"bash", "python", "toml", "text", "json"}
RUNNABLE = {"bash", "python"}
SKIP_TAGS = {
    "key": "needs an API key and the network",
    "server": "needs a running OpenAI-compatible server",
    "person": "needs a person to label",
    "install": "installs the project or runs the test suite",
    "data": "needs a full data set from ../shared/data",
}
MODEL_TAG = "model"
# Modules a Python example may import besides `memjudge` itself (whose names must be in __all__):
# the gate a memory pipeline imports on its own (stdlib only), and the schema registry.
PUBLIC_MODULES = {"memjudge.gate", "memjudge.formats.schemas", "memjudge.diff"}


def manual_pages() -> list[Path]:
    """The manual's pages: every docs/*.md (a new page is picked up without a change here)."""
    return sorted(DOCS.glob("*.md"))


@dataclass(frozen=True)
class Block:
    path: str  # relative to the clone's root
    line: int  # 1-based line of the opening fence
    lang: str
    tags: tuple[str, ...]
    code: str

    @property
    def runs(self) -> bool:
        return self.lang in RUNNABLE and not self.tags

    def __str__(self) -> str:
        info = " ".join((self.lang, *self.tags)).strip()
        return f"{self.path}:{self.line}: ```{info}\n{self.code}```"


def blocks_of(path: Path = README, text: str | None = None) -> list[Block]:
    """The fenced blocks of a Markdown file, in order (fences at the start of a line; a block
    indented under a list item or an admonition counts too)."""
    name = path.relative_to(ROOT).as_posix() if path.is_absolute() else str(path)
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines(keepends=True)
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^( *)```(.*)$", lines[i].rstrip("\n"))
        if not m:
            i += 1
            continue
        indent, start, words = m.group(1), i + 1, m.group(2).split()
        body = []
        i += 1
        while i < len(lines) and not re.match(rf"^{indent}```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        assert i < len(lines), f"{name}:{start}: a fenced block is never closed"
        blocks.append(Block(name, start, words[0] if words else "", tuple(words[1:]), "".join(body)))
        i += 1
    return blocks


def check_declared(blocks: list[Block]) -> None:
    for b in blocks:
        assert b.lang in LANGUAGES, (
            f"{b.path}:{b.line}: a fence needs a language ({', '.join(sorted(LANGUAGES))}); "
            f"illustrative output is ```text, got {b.lang!r}")
        allowed = set(SKIP_TAGS) | {MODEL_TAG} if b.lang in RUNNABLE else set()
        unknown = set(b.tags) - allowed
        assert not unknown, f"{b.path}:{b.line}: unknown tag(s) {sorted(unknown)} on a {b.lang} block"


def check_public_api(blocks: list[Block]) -> None:
    """`memjudge.NAME` and `from memjudge import NAME` only with names in `memjudge.__all__`;
    other memjudge modules only from `PUBLIC_MODULES`."""
    import memjudge

    public = set(memjudge.__all__)
    for b in blocks:
        if b.lang != "python":
            continue
        tree = ast.parse(b.code, filename=f"{b.path}:{b.line}")
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module == "memjudge":
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memjudge."):
                assert node.module in PUBLIC_MODULES, f"{b.path}:{b.line}: imports {node.module}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    assert a.name == "memjudge" or a.name in PUBLIC_MODULES or not a.name.startswith("memjudge"), (
                        f"{b.path}:{b.line}: imports {a.name}")
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id == "memjudge"):
                names = [node.attr]
            for name in names:
                assert name in public, f"{b.path}:{b.line}: memjudge.{name} is not in memjudge.__all__"


def check_dotted_names(path: Path) -> None:
    """Every `memjudge.a.b` the prose names resolves: a renamed module cannot leave it behind."""
    text = path.read_text(encoding="utf-8")
    seen = set()
    for m in re.finditer(r"`(memjudge(?:\.[A-Za-z_][A-Za-z0-9_]*)+)", text):
        dotted = m.group(1)
        if dotted in seen:
            continue
        seen.add(dotted)
        parts = dotted.split(".")
        obj, resolved = None, False
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
                resolved = True
            except AttributeError:
                pass
            break
        line = text.count("\n", 0, m.start()) + 1
        assert resolved, f"{path.relative_to(ROOT)}:{line}: `{dotted}` does not resolve"


def env_for(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)  # conftest has removed provider keys and set MEMJUDGE_CACHE_DIR
    env["PATH"] = str(BIN) + os.pathsep + env.get("PATH", "")
    env["MEMJUDGE_NO_DOTENV"] = "1"
    env["MPLBACKEND"] = "Agg"
    env["HOME"] = str(tmp / "home")  # nothing of the developer's (caches, config) leaks in
    env.pop("PYTHONPATH", None)  # the installed project, as a reader has it
    return env


def workdir(tmp_path: Path) -> Path:
    """A fresh folder holding what a clone's root offers the examples: `examples/`."""
    assert (BIN / "memjudge").exists(), f"no memjudge in {BIN}: install the project (pip install -e .)"
    work = tmp_path / "clone"
    work.mkdir()
    (tmp_path / "home").mkdir()
    shutil.copytree(ROOT / "examples", work / "examples")
    return work


def run_block(block: Block, work: Path, env: dict[str, str]) -> None:
    if block.lang == "bash":
        argv = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    else:
        argv = [str(BIN / "python"), "-c", block.code]
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=3000)
    if proc.returncode != 0:
        pytest.fail(
            f"exit status {proc.returncode} from\n{block}\n--- stdout (end) ---\n{proc.stdout[-3000:]}"
            f"\n--- stderr ---\n{proc.stderr[-6000:]}",
            pytrace=False,
        )


def model_installed() -> bool:  # as tests/test_demo.py decides it
    import importlib.util

    from memjudge.judges import local as L

    if importlib.util.find_spec("llama_cpp") is None:
        return False
    return all(importlib.util.find_spec(p) is not None for p in L.PACKAGED[L.DEFAULT_MODEL].packages)
