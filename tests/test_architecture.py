"""The package's shape, checked from its source (issue #14, "One-way house").

Every module under src/memjudge is parsed with `ast`; every `import` counts, at module level
or inside a function (a function-level import runs the first time the function does, so it
can close a cycle as surely as a top-level one). Imports under ``if TYPE_CHECKING:`` never
run and are left out. Relative imports are resolved, and ``from memjudge.x import y`` is an
import of the module ``memjudge.x.y`` when y is a submodule, else of ``memjudge.x``. Names
looked up at run time from strings (the registries' ``"module:attribute"``) are not imports.

Checked:
(a) no import cycle between modules;
(b) no module takes another module's private name (``from memjudge.a import _x``, or
    ``a._x`` through a module bound by an import), and a private module (``pkg._mod``) is
    imported only from inside its package; ``memjudge._util`` is the shared place;
(c) no module is longer than `MAX_LINES` lines, word lists aside;
(d) subpackages import one way: `LAYERS`, lowest first; a unit imports only units below it
    (and itself).
Plus the public API: every name in ``memjudge.__all__`` resolves, lazily.

"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "memjudge"
MAX_LINES = 700
WORD_LISTS = {"memjudge.simulation.lexicon"}
SHARED_PRIVATE = {"memjudge._util", "memjudge._rubrics"}  # private by name, shared by design

# Lowest first. A unit is a top-level module or subpackage of memjudge ("memjudge" is the
# package's own __init__, the public API). simulation sits below judges: the simulated judge
# reads a corpus's truth (judges/sim.py). annotate and importers need only formats; importers
# sit above annotate (the Label Studio importer writes a gold file the annotate way). diff
# compares two runs' labels with the statistics below it; reporting shows its diff.json. web (the
# pages of annotate and view) reads runs the way the analyses do: above them and the gold file.
LAYERS = [
    "errors",
    "_util",
    "gate",
    "formats",
    "privacy",
    "simulation",
    "judges",
    "scoring",
    "stats",
    "policies",
    "comparison",
    "diff",
    "annotate",
    "importers",
    "cascade",
    "web",
    "reporting",
    "demo",
    "doctor",  # `memjudge doctor`: the embedded judge's build, weights and self-test (judges' local_runtime)
    "cli",
    "memjudge",
    "__main__",
]

# Units a unit may not import although they sit below it. Statistics are pure functions (arrays
# in, numbers out): they read no judge and write no judges file; the CLI writes what they return.
FORBIDDEN = {"stats": {"judges", "scoring", "simulation"}}

# What any module may take from the package root: its version (the root imports nothing itself).
ROOT_NAMES = {"__version__"}


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    tree: ast.Module
    lines: int
    imports: list[tuple[str, int]] = field(default_factory=list)          # (module, line)
    private_uses: list[tuple[str, int]] = field(default_factory=list)     # ("memjudge.a:_x", line)
    root_names: list[tuple[str, int]] = field(default_factory=list)       # names taken from memjudge


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:` (never run)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                for child in node.body:
                    skip.update(id(n) for n in ast.walk(child))
    return skip


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _load() -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name, is_package = _module_name(path)
        text = path.read_text(encoding="utf-8")
        modules[name] = Module(name, path, is_package, ast.parse(text, str(path)), text.count("\n"))
    for m in modules.values():
        skip = _type_checking_nodes(m.tree)
        bound: dict[str, str] = {}  # local name -> memjudge module it is bound to
        for node in ast.walk(m.tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "memjudge":
                        m.imports.append((_existing(modules, a.name), node.lineno))
                        if a.asname:
                            bound[a.asname] = a.name
                        else:
                            bound["memjudge"] = "memjudge"
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = m.name.split(".") if m.is_package else m.name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != "memjudge":
                    continue
                for a in node.names:
                    full = f"{source}.{a.name}"
                    if full in modules:  # a submodule
                        m.imports.append((full, node.lineno))
                        bound[a.asname or a.name] = full
                        continue
                    m.imports.append((_existing(modules, source), node.lineno))
                    if source == "memjudge":
                        m.root_names.append((a.name, node.lineno))
                    if _is_private(a.name) and source != m.name:
                        m.private_uses.append((f"{source}:{a.name}", node.lineno))
        for node in ast.walk(m.tree):
            if id(node) in skip or not isinstance(node, ast.Attribute) or not _is_private(node.attr):
                continue
            base = _dotted(node.value)
            if base is None:
                continue
            head = base.split(".")[0]
            if head in bound:
                target = bound[head] + base[len(head):] if head != "memjudge" else base
                if target in modules and target != m.name:
                    m.private_uses.append((f"{target}:{node.attr}", node.lineno))
    return modules


def _existing(modules: dict[str, Module], name: str) -> str:
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


MODULES = _load()


def _unit(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "memjudge"


def _rel(m: Module) -> str:
    return str(m.path.relative_to(SRC.parent))


def test_the_source_is_found_and_parsed():
    assert {"memjudge", "memjudge.errors", "memjudge.gate", "memjudge.formats.readers", "memjudge.cli"} <= set(MODULES)
    # the resolution rules on modules whose imports are known
    readers = dict(MODULES["memjudge.formats.readers"].imports)
    assert "memjudge.errors" in readers and "memjudge.formats.columns" in readers
    assert {i for i, _ in MODULES["memjudge.gate"].imports} == {"memjudge.errors"}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle_and_passes_a_tree():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycle():
    graph = {name: {i for i, _ in m.imports if i != name} for name, m in MODULES.items()}
    cycles = _cycles(graph)
    detail = []
    for comp in cycles:
        inside = set(comp)
        for name in comp:
            for target, line in MODULES[name].imports:
                if target in inside and target != name:
                    detail.append(f"{_rel(MODULES[name])}:{line} imports {target}")
    assert not cycles, "import cycles:\n" + "\n".join(sorted(set(detail)))


def test_no_module_takes_another_modules_private_names():
    bad = []
    for m in MODULES.values():
        bad += [f"{_rel(m)}:{line} uses {use}" for use, line in m.private_uses]
        for target, line in m.imports:
            parts = target.split(".")
            for k in range(1, len(parts)):
                owner, private = ".".join(parts[:k]), ".".join(parts[: k + 1])
                if _is_private(parts[k]) and private not in SHARED_PRIVATE and not (m.name + ".").startswith(owner + "."):
                    bad.append(f"{_rel(m)}:{line} imports {target}, private to {owner}")
    assert not bad, "private names used across modules:\n" + "\n".join(sorted(set(bad)))


def test_no_module_is_too_long():
    long = {_rel(m): m.lines for m in MODULES.values() if m.lines > MAX_LINES and m.name not in WORD_LISTS}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_every_unit_has_a_layer():
    assert {_unit(n) for n in MODULES} <= set(LAYERS), sorted({_unit(n) for n in MODULES} - set(LAYERS))


def test_subpackages_import_one_way():
    rank = {u: i for i, u in enumerate(LAYERS)}
    bad = []
    for m in MODULES.values():
        mine = _unit(m.name)
        root = {line for name, line in m.root_names if name in ROOT_NAMES}
        for target, line in m.imports:
            theirs = _unit(target)
            if theirs == "memjudge" and line in root:
                continue  # `from memjudge import __version__`: the root imports nothing itself
            if rank[theirs] > rank[mine]:
                bad.append(f"{_rel(m)}:{line} ({mine}) imports {target} ({theirs}, a higher layer)")
    assert not bad, "imports against the layering " + " < ".join(LAYERS) + ":\n" + "\n".join(sorted(set(bad)))


# ---------------------------------------------------------------------------------------
# the public API


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(SRC), "PATH": ""})
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_statistics_import_no_judge_and_no_scorer():
    bad = [f"{_rel(m)}:{line} imports {target}" for m in MODULES.values() for target, line in m.imports
           if _unit(target) in FORBIDDEN.get(_unit(m.name), set())]
    assert not bad, "imports a unit may not make (FORBIDDEN):\n" + "\n".join(sorted(set(bad)))


def test_every_public_name_resolves_and_is_listed():
    import memjudge

    assert memjudge.__all__ and len(set(memjudge.__all__)) == len(memjudge.__all__)
    for name in memjudge.__all__:
        assert getattr(memjudge, name) is not None, name
    assert set(memjudge.__all__) <= set(dir(memjudge))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        memjudge.nope  # noqa: B018
    # the documented API (/work/notes/API.md, the README's Python examples use only these)
    assert {
        "score", "score_run", "ScoreResult", "noise", "agreement", "calibrate", "panel", "sample", "estimate",
        "compare", "robustness", "WriteAll", "GlobalThreshold", "Targeted", "PerCategory", "make_policy",
        "simulate", "report", "batch_status", "batch_cancel", "read_candidates", "read_sources", "read_facts",
        "read_labels", "read_coverage", "read_gold", "Estimate", "JudgeConfig", "MemjudgeError", "InputError",
        "UsageError", "__version__",
        "coverage_agreement",  # issue #35: a judge's coverage labels against a reference map
        "Table", "import_memories",  # issue #34: any table by mapping, the memory systems' exports
        "judge_config", "RunOptions",  # issue #36: one judge settings object, score_run's run options
        "write_threshold",  # issue #51: statistics return a threshold, this writes it into a judges file
        "run_cascade",  # issue #51: the certified cascade
    } == set(memjudge.__all__)
    assert memjudge.Estimate(0.5, 0.4, 0.6).to_dict() == {"value": 0.5, "lo": 0.4, "hi": 0.6}
    assert issubclass(memjudge.InputError, memjudge.MemjudgeError)


def test_importing_memjudge_and_the_gate_stays_light():
    out = _run("import sys, memjudge, memjudge.gate; dir(memjudge); "
               "print(sorted(m for m in sys.modules if m.split('.')[0] in ('memjudge', 'numpy', 'pandas', 'scipy')))")
    assert out == str(["memjudge", "memjudge.errors", "memjudge.gate"])


def test_policy_file_error_is_a_memjudge_error():
    from memjudge.errors import MemjudgeError
    from memjudge.gate import PolicyFileError, load_policy

    assert issubclass(PolicyFileError, MemjudgeError) and issubclass(PolicyFileError, ValueError)
    with pytest.raises(MemjudgeError, match="cannot read"):
        load_policy(SRC / "no-such-policy.json")


def test_the_error_tree_in_the_docstring_names_every_memjudge_error():
    """errors.py draws the tree: every MemjudgeError subclass in the package appears in it."""
    import memjudge.errors as errors

    names = set()
    for m in MODULES.values():
        for node in ast.walk(m.tree):
            if isinstance(node, ast.ClassDef):
                bases = {_dotted(b) for b in node.bases}
                if bases & {"MemjudgeError", "InputError", "UsageError", "errors.MemjudgeError"}:
                    names.add(node.name)
    assert {"PolicyFileError", "InputError", "UsageError"} <= names
    missing = [n for n in sorted(names) if n not in (errors.__doc__ or "")]
    assert not missing, f"not in the error tree of memjudge/errors.py: {missing}"
