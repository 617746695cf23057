"""Bring your own inputs: `--map` on every command that reads candidates, sources, facts or gold
(memjudge.formats.mapping), and `memjudge import mem0|memos|graphiti|langmem|letta FILE --out DIR`
(memjudge.importers.memory_systems)."""

from __future__ import annotations

from memjudge.errors import UsageError

__all__ = ["add_map", "apply_maps", "cmd_import_memory"]

# Where each input lives on a command's arguments.
_ATTRS = {"candidates": ("candidates", "items"), "sources": ("sources",), "facts": ("facts",), "gold": ("gold",)}

MAP_HELP = ("column mapping: TARGET=SOURCE,... for the {main} (text=memory,persona_id=user_id,confidence=metadata.score; "
            "dotted paths reach into JSON; default.category=NAME; assertion_id=@hash), KIND:TARGET=SOURCE for another "
            "input (sources:persona_id=user), or a mapping .toml file; repeatable")


def add_map(parser, main: str, handled: bool = False) -> None:
    """--map on a command whose main input (an unprefixed mapping's) is `main`; `handled`: the
    handler reads the mapping itself (memjudge import)."""
    parser.add_argument("--map", action="append", default=[], metavar="MAPPING", help=MAP_HELP.format(main=main))
    parser.set_defaults(map_main=main, map_handled=handled)


def apply_maps(args) -> None:
    """Each mapped input's path becomes a `Table` (the path and its mapping), which every reader takes."""
    specs = getattr(args, "map", None)
    if not specs or getattr(args, "map_handled", False):
        return
    from memjudge.formats import Table, parse_mappings

    for kind, tmap in parse_mappings(specs, args.map_main).items():
        attrs = [a for a in _ATTRS[kind] if getattr(args, a, None) is not None]
        if not attrs:
            raise UsageError(f"--map: memjudge {args.command} reads no {kind} here (a {kind} mapping needs a {kind} file)")
        for a in attrs:
            value = getattr(args, a)
            setattr(args, a, [Table(v, tmap) for v in value] if isinstance(value, list) else Table(value, tmap))


def cmd_import_memory(args) -> int:
    from memjudge.formats import dumps, parse_mappings
    from memjudge.importers.memory_systems import import_memories

    res = import_memories(args.dataset, args.folder, out=args.out, mapping=parse_mappings(args.map, "candidates"))
    s = res.summary()
    if args.json:
        print(dumps(s, indent=2))
        return 0
    cats = ", ".join(f"{k} {v:,}" for k, v in s["categories"].items())
    src = "no conversation in the export" if s["sources"] is None else f"{s['sources']:,} sources (the conversation)"
    print(f"{s['system']}: {s['candidates']:,} candidates ({s['personas']:,} personas; {cats}), {src} → {args.out}")
    print(f"  confidence: {s['confidence']['with']:,} of {s['candidates']:,} have one ({s['confidence']['note']})")
    if s["extra_columns"]:
        print(f"  extra columns (carried into the labels): {', '.join(s['extra_columns'])}")
    return 0
