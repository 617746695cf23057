"""Harness overhead of `memjudge score` against a bare async SDK loop, and the cost of a fully
cached re-run (issue 2, item 8).

    python bench/throughput.py [--items 2000] [--concurrency 64] [--latency 0.1] [--cached-items 4715]

Everything runs against tests/fake_server.py in its own process (so the server does not
compete with the client for the GIL), at `--latency` seconds per answer:

1. memjudge: the whole process `python -m memjudge score ... --concurrency 64`, start-up,
   reading, rendering, cache and journal writes and outputs included.
2. bare loops: a separate process with `openai.AsyncOpenAI` and an asyncio semaphore of the
   same size, sending the same rendered prompts with the same JSON-schema response format
   (prompts are rendered beforehand and read from a file: the bare loop does no work but
   the HTTP calls and json.loads).
3. the ratio bare / memjudge (1.0 = no overhead; targets: >= 0.9 x the bare `create()`
   loop, >= 1.0 x the bare `parse()` loop), and the ideal time items / concurrency x latency
   for reference.
3b. the same for the Gemini provider (`memjudge score --judge gemini:...`) against a bare
   `google-genai` loop (`client.aio.models.generate_content` with the same JSON schema,
   json.loads of the text); target >= 0.9.
4. a fully cached re-run of `--cached-items` items x `--cached-replicates` (the Quickstart's
   4,715 x 2 by default), whole process including start-up (target < 1.0 s, issue 36;
   `memjudge --help` alone is printed beside it), and inside `score_run` (target < 0.4 s: a
   fresh process imports memjudge, then times the one call the CLI makes): from the run
   directory's journal (the same command again) and from the cache alone (a fresh run
   directory).

Each timing is the best of `--repeats` runs (the machine is shared; the best is the least
disturbed). `--cached-only` runs section 4 alone; `--save` also writes the report, with the
date and the load, to bench/results/throughput.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "bench-judge"

BARE = r'''
import asyncio, json, sys
from typing import Literal
import openai
from pydantic import BaseModel, ConfigDict


class SupportAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    verdict: Literal["supported", "unsupported"]
    evidence: str
    rationale: str


async def main(url, prompts_path, concurrency, mode):
    prompts = [json.loads(line) for line in open(prompts_path)]
    client = openai.AsyncOpenAI(api_key="EMPTY", base_url=url, max_retries=0, timeout=120)
    sem = asyncio.Semaphore(concurrency)
    results = [None] * len(prompts)

    async def one(i, p):
        messages = [{"role": "system", "content": p["system"]}, {"role": "user", "content": p["user"]}]
        async with sem:
            if mode == "parse":  # the SDK's structured-output call, as memjudge's provider uses
                r = await client.chat.completions.parse(model=p["model"], temperature=0, messages=messages, response_format=SupportAnswer)
                results[i] = r.choices[0].message.parsed.verdict
            else:  # the leanest call: create() with a JSON schema, json.loads of the text
                r = await client.chat.completions.create(
                    model=p["model"], temperature=0, messages=messages,
                    response_format={"type": "json_schema", "json_schema": {"name": "SupportAnswer", "schema": p["schema"], "strict": True}})
                results[i] = json.loads(r.choices[0].message.content)["verdict"]

    await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    await client.close()
    assert all(results), "missing answers"
    print(len(results))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
'''

BARE_GEMINI = r'''
import asyncio, json, sys
from google import genai
from google.genai import types


async def main(url, prompts_path, concurrency):
    prompts = [json.loads(line) for line in open(prompts_path)]
    client = genai.Client(api_key="EMPTY", http_options=types.HttpOptions(
        base_url=url, api_version="v1beta", timeout=120000, retry_options=types.HttpRetryOptions(attempts=1)))
    sem = asyncio.Semaphore(concurrency)
    results = [None] * len(prompts)

    async def one(i, p):
        config = types.GenerateContentConfig(system_instruction=p["system"], temperature=0,
                                             response_mime_type="application/json", response_json_schema=p["schema"])
        async with sem:
            r = await client.aio.models.generate_content(model=p["model"], contents=p["user"], config=config)
            results[i] = json.loads(r.text)["verdict"]

    await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    await client.aio.aclose()
    assert all(results), "missing answers"
    print(len(results))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
'''


# One score_run call as `memjudge score` makes it (tests/fake_server.py answers the SDK), timed
# after the imports: the time inside score_run, printed as JSON.
IN_PROCESS = r'''
import json, sys, time
from memjudge.judges.panel import judge_config
from memjudge.scoring.engine import RunOptions, score_run

cand, src, url, concurrency, replicates, out, cache = sys.argv[1:]
judge = judge_config(f"openai:{MODEL}", None, base_url=url, concurrency=int(concurrency))
t0, c0 = time.perf_counter(), time.process_time()
r = score_run(cand, src, judge, replicates=int(replicates), out=out, cache_dir=cache, progress=False, run=RunOptions(argv={}))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
assert r.summary.requested == 0 and r.summary.errors == 0, r.summary
print(json.dumps({"wall": wall, "cpu": cpu, "resumed": r.summary.resumed, "cached": r.summary.cached}))
'''.replace("{MODEL}", MODEL)


def in_process(args: list[str]) -> dict:
    r = subprocess.run([sys.executable, "-c", IN_PROCESS, *args], capture_output=True, text=True, env=env())
    if r.returncode != 0:
        raise SystemExit(f"failed: score_run in process\n{r.stderr}")
    return json.loads(r.stdout)


def make_inputs(folder: Path, n: int, per_persona: int = 10) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    cand, src = folder / "candidates.jsonl", folder / "sources.jsonl"
    personas = (n + per_persona - 1) // per_persona
    with open(src, "w") as f:
        for p in range(personas):
            text = " ".join(f"Post {k} of user {p}: I spent the weekend hiking near the lake and cooking for friends." for k in range(12))
            f.write(json.dumps({"persona_id": f"u{p:05d}", "source": text}) + "\n")
    with open(cand, "w") as f:
        for i in range(n):
            marker = " [unsupported]" if i % 9 == 0 else ""
            f.write(json.dumps({"persona_id": f"u{i // per_persona:05d}", "assertion_id": f"a{i:06d}", "category": ["values", "hobby", "job"][i % 3],
                                "confidence": (i % 100) / 100, "text": f"The user enjoys activity number {i}{marker}"}) + "\n")
    return cand, src


def env() -> dict:
    e = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in ("OPENAI_BASE_URL",)}
    e["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + e.get("PYTHONPATH", "")
    return e


CPU: dict[str, list[float]] = {}  # label -> CPU seconds (user + sys) of each timed process


def timed(cmd: list[str], label: str | None = None, **kw) -> float:
    """Wall seconds of the whole process; its CPU seconds go to CPU[label] (load-independent)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env(), **kw)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{r.stderr}")
    if label:
        CPU.setdefault(label, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return dt


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fake_server.py"), "--port", "0", "--latency", str(latency)],
                            stdout=subprocess.PIPE, text=True, env=env())
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit("the fake server did not start")
    return proc, url


def render_prompts(cand: Path, src: Path, path: Path) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from memjudge.formats import read_candidates, read_sources
    from memjudge.judges.rubrics import load_rubric

    rub = load_rubric("support")
    schema = rub.model.model_json_schema()
    sources = dict(zip(*read_sources(src)[["persona_id", "source"]].to_numpy().T))
    with open(path, "w") as f:
        for row in read_candidates(cand).itertuples():
            p = rub.render_support(source=sources[row.persona_id], assertion=row.text, category=row.category)
            f.write(json.dumps({"model": MODEL, "system": p.system, "user": p.user, "schema": schema}) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--cached-items", type=int, default=4715)
    ap.add_argument("--cached-replicates", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cached-only", action="store_true", help="section 4 alone")
    ap.add_argument("--save", action="store_true", help="also write the report to bench/results/throughput.txt")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    server, url = start_server(args.latency)
    try:
        with tempfile.TemporaryDirectory(prefix="memjudge-bench-") as tmp:
            tmp = Path(tmp)
            cand, src = make_inputs(tmp / "in", args.items)
            prompts = tmp / "prompts.jsonl"
            render_prompts(cand, src, prompts)
            bare_script = tmp / "bare.py"
            bare_script.write_text(BARE)
            gemini_script = tmp / "bare_gemini.py"
            gemini_script.write_text(BARE_GEMINI)

            mj_times, bare_times, lean_times, gmj_times, gbare_times = [], [], [], [], []
            for rep in range(0 if args.cached_only else args.repeats):
                # a fresh cache and run directory each time: every item is a request
                mj_times.append(timed([sys.executable, "-m", "memjudge", "score", str(cand), "--sources", str(src),
                                       "--judge", f"openai:{MODEL}", "--base-url", f"{url}/v1", "--concurrency", str(args.concurrency),
                                       "--no-progress", "--out", str(tmp / f"run{rep}"), "--cache-dir", str(tmp / f"cache{rep}")], "memjudge"))
                bare_times.append(timed([sys.executable, str(bare_script), f"{url}/v1", str(prompts), str(args.concurrency), "parse"], "bare_parse"))
                lean_times.append(timed([sys.executable, str(bare_script), f"{url}/v1", str(prompts), str(args.concurrency), "create"], "bare_create"))
                gmj_times.append(timed([sys.executable, "-m", "memjudge", "score", str(cand), "--sources", str(src),
                                        "--judge", f"gemini:{MODEL}", "--base-url", url, "--concurrency", str(args.concurrency),
                                        "--no-progress", "--out", str(tmp / f"grun{rep}"), "--cache-dir", str(tmp / f"gcache{rep}")], "memjudge_gemini"))
                gbare_times.append(timed([sys.executable, str(gemini_script), url, str(prompts), str(args.concurrency)], "bare_gemini"))
            if not args.cached_only:
                labels = (tmp / "run0" / "labels.jsonl").read_text().splitlines()
                assert len(labels) == args.items and all(json.loads(x)["verdict"] for x in labels), "memjudge run incomplete"

            ccand, csrc = make_inputs(tmp / "cached-in", args.cached_items)
            cmd = [sys.executable, "-m", "memjudge", "score", str(ccand), "--sources", str(csrc), "--judge", f"openai:{MODEL}",
                   "--base-url", f"{url}/v1", "--concurrency", str(args.concurrency), "--replicates", str(args.cached_replicates),
                   "--no-progress", "--cache-dir", str(tmp / "ccache")]
            timed(cmd + ["--out", str(tmp / "cfill")])  # fill the cache
            journal_times = [timed(cmd + ["--out", str(tmp / "cfill")], "cached_journal") for _ in range(args.repeats)]
            cache_times = [timed(cmd + ["--out", str(tmp / f"cfresh{i}")], "cached_cache") for i in range(args.repeats)]
            startup = min(timed([sys.executable, "-m", "memjudge", "--help"]) for _ in range(args.repeats))
            inner = [str(ccand), str(csrc), f"{url}/v1", str(args.concurrency), str(args.cached_replicates)]
            journal_inside = [in_process(inner + [str(tmp / "cfill"), str(tmp / "ccache")]) for _ in range(args.repeats)]
            cache_inside = [in_process(inner + [str(tmp / f"cinside{i}"), str(tmp / "ccache")]) for i in range(args.repeats)]
            assert all(x["resumed"] > 0 and x["cached"] == 0 for x in journal_inside)
            assert all(x["cached"] > 0 and x["resumed"] == 0 for x in cache_inside)
    finally:
        server.terminate()
        server.wait(timeout=10)

    load = round(os.getloadavg()[0], 2)
    cpu = {k: min(v) for k, v in CPU.items()}
    j_in, c_in = min(journal_inside, key=lambda x: x["wall"]), min(cache_inside, key=lambda x: x["wall"])
    result = {
        "cached_items": args.cached_items, "cached_replicates": args.cached_replicates,
        "cached_rerun_journal_s": round(min(journal_times), 3), "cached_rerun_cache_only_s": round(min(cache_times), 3),
        "score_run_journal_s": round(j_in["wall"], 3), "score_run_cache_only_s": round(c_in["wall"], 3),
        "score_run_cpu_s": {"journal": round(j_in["cpu"], 3), "cache_only": round(c_in["cpu"], 3)},
        "python_startup_memjudge_help_s": round(startup, 3),
        "repeats": args.repeats, "cpus": os.cpu_count(), "load_avg_1m": load,
    }
    lines = []
    if not args.cached_only:
        mj, bare, lean = min(mj_times), min(bare_times), min(lean_times)
        gmj, gbare = min(gmj_times), min(gbare_times)
        result.update({
            "items": args.items, "concurrency": args.concurrency, "latency_s": args.latency,
            "ideal_s": round(args.items / args.concurrency * args.latency, 3),
            "memjudge_s": round(mj, 3), "bare_loop_s": round(bare, 3), "ratio_bare_over_memjudge": round(bare / mj, 3),
            "bare_create_loop_s": round(lean, 3), "ratio_bare_create_over_memjudge": round(lean / mj, 3),
            "memjudge_gemini_s": round(gmj, 3), "bare_gemini_loop_s": round(gbare, 3), "ratio_bare_gemini_over_memjudge": round(gbare / gmj, 3),
        })
        lines += [
            f"{args.items} items, concurrency {args.concurrency}, server latency {args.latency * 1000:.0f} ms "
            f"(ideal {result['ideal_s']:.2f} s; best of {args.repeats}; load average {load} on {result['cpus']} CPUs)",
            f"  memjudge score (whole process): {mj:6.2f} s   (CPU {cpu['memjudge']:.2f} s)",
            f"  bare async SDK loop, parse():   {bare:6.2f} s   (CPU {cpu['bare_parse']:.2f} s)   ratio bare / memjudge {bare / mj:.3f} (target >= 1.0)",
            f"  bare async SDK loop, create():  {lean:6.2f} s   (CPU {cpu['bare_create']:.2f} s)   ratio bare / memjudge {lean / mj:.3f} (target >= 0.9)",
            f"  memjudge score, gemini:        {gmj:6.2f} s   (CPU {cpu['memjudge_gemini']:.2f} s)",
            f"  bare google-genai loop:         {gbare:6.2f} s   (CPU {cpu['bare_gemini']:.2f} s)   ratio bare / memjudge {gbare / gmj:.3f} (target >= 0.9)",
        ]
    calls = args.cached_items * args.cached_replicates
    lines += [
        f"cached re-run of {args.cached_items} items x {args.cached_replicates} replicates ({calls} calls; best of {args.repeats}; "
        f"load average {load} on {result['cpus']} CPUs)",
        "  whole process, start-up included (target < 1.0 s):",
        f"    from the run's journal:       {min(journal_times):6.2f} s   (CPU {cpu['cached_journal']:.2f} s)",
        f"    from the cache alone:         {min(cache_times):6.2f} s   (CPU {cpu['cached_cache']:.2f} s)",
        f"    (memjudge --help alone:       {startup:6.2f} s)",
        "  inside score_run, after imports (target < 0.4 s):",
        f"    from the run's journal:       {j_in['wall']:6.2f} s   (CPU {j_in['cpu']:.2f} s; {j_in['wall'] / calls * 1e6:.0f} us per call)",
        f"    from the cache alone:         {c_in['wall']:6.2f} s   (CPU {c_in['cpu']:.2f} s; {c_in['wall'] / calls * 1e6:.0f} us per call)",
    ]
    text = "\n".join(lines)
    print(json.dumps(result, indent=2) if args.json else text)
    if args.save:
        path = ROOT / "bench" / "results" / "throughput.txt"
        stamp = time.strftime("%Y-%m-%d %H:%M %Z")
        path.write_text(f"python bench/throughput.py {' '.join(argv if argv is not None else sys.argv[1:])}\n"
                        f"{stamp}, load average {load} on {result['cpus']} CPUs (a shared machine; best of {args.repeats})\n\n{text}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
