"""The command line's privacy parts (spec §16): the `--private` flags of every command that asks
a judge, and `memjudge privacy-check`, which shows what `--private` would replace and sends
nothing. Nothing heavy is imported until a command runs.
"""

from __future__ import annotations

import sys

__all__ = ["add_private_flags", "add_privacy_check_parser", "cmd_privacy_check", "private_overrides"]


def add_private_flags(parser) -> None:
    """--private, --private-patterns-only, --private-style (a command that asks a judge)."""
    g = parser.add_argument_group("privacy (spec §16; the [private] extra)")
    g.add_argument("--private", action="store_true", default=None,
                   help="pseudonymise PII in sources, candidates and facts before they are sent to a judge on a network "
                        "(openai:, gemini:, any base URL); answers are mapped back. local: and sim: judges send nothing")
    g.add_argument("--private-patterns-only", action="store_true", default=None,
                   help="run --private without the NER model: e-mails, phones, IBANs, cards, addresses are replaced, "
                        "but names, places and organisations pass in the clear")
    g.add_argument("--private-style", choices=["placeholder", "surrogate"], default=None,
                   help="stand-ins: typed placeholders like <PERSON_1> (default) or realistic surrogates")


def private_overrides(args) -> dict:
    """The judge settings the flags set (None: the judges file's, or the default)."""
    patterns_only = getattr(args, "private_patterns_only", None)
    private = getattr(args, "private", None) or (True if patterns_only else None)
    return {"private": private, "private_patterns_only": patterns_only, "private_style": getattr(args, "private_style", None)}


def add_privacy_check_parser(sub) -> None:
    pc = sub.add_parser("privacy-check", help="show what --private would replace (per entity type and persona); sends nothing")
    pc.add_argument("candidates", help="candidate assertions (JSONL, CSV or Parquet)")
    pc.add_argument("--sources", required=True, help="one source per persona (persona_id, source)")
    pc.add_argument("--judge", help="take the privacy settings (private_entities, private_style) of this judge in --judges-file")
    pc.add_argument("--judges-file", help="judges.toml holding --judge's settings")
    pc.add_argument("--private-patterns-only", action="store_true", default=None, help="without the NER model (names pass)")
    pc.add_argument("--private-style", choices=["placeholder", "surrogate"], default=None, help="placeholder (default) or surrogate")
    pc.add_argument("--examples", type=int, default=3, help="examples per entity type (default 3)")
    pc.add_argument("--json", action="store_true", help="print the result as JSON (it holds the examples' original text)")
    pc.set_defaults(func=cmd_privacy_check)


def cmd_privacy_check(args) -> int:
    from memjudge import formats as io
    from memjudge.judges.base import JudgeConfig
    from memjudge.judges.panel import judge_config
    from memjudge.privacy import PrivacySettings, privacy_check

    config = judge_config(args.judge, args.judges_file) if args.judge else JudgeConfig(spec="sim:none")
    overrides = {k: v for k, v in private_overrides(args).items() if v is not None and k != "private"}
    settings = PrivacySettings.of(config.model_copy(update=overrides))
    cands = io.read_candidates(args.candidates)
    srcs = io.read_sources(args.sources)
    io.check_sources_cover(cands, srcs, args.candidates, args.sources)
    res = privacy_check(cands, srcs, settings, examples=args.examples)
    if args.json:
        print(io.dumps(res, indent=2))
        return 0
    ner = res["recognisers"]["ner_model"]
    print(f"{res['personas']} personas, {res['texts']} texts; stand-ins: {res['style']}; "
          f"NER: {ner['package'] + ' ' + str(ner['version']) if ner else 'none (names pass)'}; "
          f"detection {res['detection_seconds']:.1f} s; nothing was sent")
    if not res["by_type"]:
        print("nothing would be replaced")
    for entity, v in res["by_type"].items():
        shown = "; ".join(f"{e['original']!r} -> {e['stand_in']} ({e['persona_id']})" for e in v["examples"])
        print(f"  {entity:<16} {v['entities']:>5} in {v['personas']} personas   e.g. {shown}")
    quiet = [pid for pid, c in res["by_persona"].items() if not c]
    if quiet:
        print(f"  {len(quiet)} personas with nothing found: {', '.join(quiet[:5])}{' ...' if len(quiet) > 5 else ''}", file=sys.stderr)
    return 0
