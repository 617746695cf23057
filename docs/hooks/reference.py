"""MkDocs hook: the manual's reference parts are generated from the code at build time, so none
of them can drift from it.

A page holds a marker comment and this hook replaces it before the page is converted:

    <!-- memjudge:cli -->        every command's help, from memjudge.cli.parser.build_parser()
    <!-- memjudge:api -->        every name of memjudge.__all__, as mkdocstrings `:::` blocks
    <!-- memjudge:schemas -->    every JSON Schema of memjudge.formats.schemas.SCHEMAS
    <!-- memjudge:include PATH -->  a file of the repository (PATH from its root), e.g. CHANGELOG.md

and it drops the tests' tags from fences (```bash key becomes ```bash).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- memjudge:(\w+)(?: ([^ ]+))? -->")
# The tests' tags after a fence's language (```bash key, ```bash model): Markdown takes only the language.
TAGGED_FENCE = re.compile(r"^( *```[\w-]+)(?: [\w ]+)$", re.M)
WIDTH = "100"  # argparse wraps help text to $COLUMNS: fixed, so the page is the same on every machine


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:  # argparse has no public walk over its subparsers
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def cli_reference() -> str:
    from memjudge.cli.parser import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        root = build_parser()
        parts = ["## memjudge", "", "```text", root.format_help().rstrip(), "```", ""]

        def walk(parser, prefix):
            for name, sub in _subcommands(parser):
                full = f"{prefix} {name}"
                level = "#" * min(2 + full.count(" ") - 1, 4)
                parts.extend([f"{level} {full}", "", "```text", sub.format_help().rstrip(), "```", ""])
                walk(sub, full)

        walk(root, "memjudge")
        return "\n".join(parts)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def api_reference() -> str:
    import memjudge

    parts = []
    for name in memjudge.__all__:
        if name == "__version__":
            continue
        obj = getattr(memjudge, name)  # where it is defined: the packages re-export lazily, out of griffe's sight
        target = f"{obj.__module__}.{obj.__qualname__}"
        parts.extend([f"## `memjudge.{name}`", "", f"::: {target}", "    options:", "      show_root_heading: false",
                      "      heading_level: 3", ""])
    parts.extend(["## `memjudge.gate`", "", "The one module a memory pipeline imports on its own (standard library only).",
                  "", "::: memjudge.gate", "    options:", "      show_root_heading: false", "      heading_level: 3", ""])
    return "\n".join(parts)


def schemas_reference() -> str:
    from memjudge.formats.schemas import SCHEMAS, json_schema

    parts = []
    for s in SCHEMAS:
        schema = json_schema(s.name)
        files = ", ".join(f"`{f}`" for f in s.files) or "a file named by `--out`"
        what = "each line of " if s.lines else ""
        doc = (schema.get("description") or "").strip().replace("\n", " ")
        parts.extend([f"### {s.name}", "", f"{doc}", "", f"Describes {what}{files}. "
                      f"Schema: [`{s.name}.schema.json`](schemas/{s.name}.schema.json).", "",
                      _key_table(schema), "", '??? note "The whole schema"', "", "    ```json",
                      *("    " + line for line in json.dumps(schema, indent=2, ensure_ascii=False).splitlines()),
                      "    ```", ""])
    return "\n".join(parts)


def _type(node: dict, defs: dict) -> str:
    if "$ref" in node:
        return node["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in node:
        return " or ".join(_type(n, defs) for n in node["anyOf"])
    if "const" in node:
        return json.dumps(node["const"])
    if "enum" in node:
        return " / ".join(json.dumps(v) for v in node["enum"])
    t = node.get("type", "any")
    if t == "array":
        return f"list of {_type(node.get('items', {}), defs)}"
    if t == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"{{name: {_type(node['additionalProperties'], defs)}}}"
    return str(t)


def _key_table(schema: dict) -> str:
    """The top-level keys: name, type, required, description (nested objects by their $defs name)."""
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    rows = ["| key | type | always | what |", "|---|---|---|---|"]
    for key, node in schema.get("properties", {}).items():
        desc = (node.get("description") or "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{key}` | {_type(node, defs).replace('|', ' or ')} | {'yes' if key in required else 'no'} "
                    f"| {desc} |")
    more = "" if schema.get("additionalProperties") is False else "\n\nOther keys: the input's own columns, carried over."
    return "\n".join(rows) + more


def include(path: str) -> str:
    """A file of the repository, its links made relative to docs/ (the README links `docs/PAGE.md`)."""
    text = (ROOT / path).read_text(encoding="utf-8")
    text = re.sub(r"\]\(docs/", "](", text).replace("](CHANGELOG.md)", "](changelog.md)")
    # Other files of the repository (tests/README.md, examples/) are not pages of the manual:
    # their links become their names, which a reader of the site finds in the clone.
    text = LINK.sub(lambda m: m.group(0) if _is_page(m.group(2)) else m.group(1), text)
    return re.sub(r"^# .*\n", "", text, count=1)  # the page has its own title


LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _is_page(target: str) -> bool:
    """A link the site can follow: a web address, an anchor, or a file under docs/."""
    if re.match(r"[a-z]+:|#", target):
        return True
    return (ROOT / "docs" / target.split("#", 1)[0]).exists()


def on_page_markdown(markdown: str, page, config, files) -> str:
    def replace(m: re.Match) -> str:
        kind, arg = m.group(1), m.group(2)
        if kind == "cli":
            return cli_reference()
        if kind == "api":
            return api_reference()
        if kind == "schemas":
            return schemas_reference()
        if kind == "include" and arg:
            return include(arg)
        raise ValueError(f"{page.file.src_path}: unknown marker memjudge:{kind}")

    return TAGGED_FENCE.sub(r"\1", MARKER.sub(replace, markdown))
