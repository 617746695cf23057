"""A million candidates on one machine (issue 36): every step of the pipeline at scale, each
as its own `python -m memjudge ...` process, with its wall time and its own peak memory.

    python bench/scale.py --sizes 100000,1000000 --workdir /tmp/memjudge-scale [--save]

For each size N (candidates; `memjudge simulate` writes ~47 per persona, so N/47.15 personas,
21,000 for a million), in order:

1. simulate: the corpus, generated once into WORKDIR/corpus-p<personas> and reused by later
   runs (its time is printed when it is generated, "cached" otherwise);
2. score: `memjudge score --judge sim:paper --replicates 2` into a fresh run folder and a
   fresh cache (every call is a request to the simulated judge: the first run), then the
   same with `sim:noisy` (the second judge `agreement` needs);
3. noise, agreement (the two judges), compare (with the simulated coverage map), estimate
   (against the corpus's gold labels), report (md, html) and `view --export` (its documented
   default limit, the first 10,000 items) over the sim:paper run folder.

Per step: wall seconds, the child's peak RSS (its own `os.wait4` rusage), microseconds per unit
(score: per call; noise, agreement, estimate: per label row read; compare, report, view: per
candidate). With two sizes, each step's linearity ratio: its time per unit at the larger size
over its time per unit at the smaller (1.0 = linear; the target is <= 1.3, i.e. time(1M) <=
1.3 x 10 x time(100k)). The scorer's cost beyond the judge's own: the sim judge's own cost,
measured in a separate process (its `generate` per call, on a sample of calls, and what it does
once per run: its identity, which hashes truth.jsonl, and reading that file at its first
answer), subtracted from the first run's time per call, and, with two sizes, from its marginal
time per call (the difference of the two runs over the difference of their calls: start-up and
imports cancel). Both are printed, with and without the judge's once-per-run cost.
Targets (issue 36): <= 100 us per call beyond the judge, <= 4 GiB peak for every step.

`--save` writes the report, with the command line, the date and the load, to
bench/results/scale.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PER_PERSONA = 99015 / 2100  # candidates per persona of `memjudge simulate --preset paper`
JUDGES = ("sim:paper", "sim:noisy")
MEMORY_TARGET_MIB = 4096
OVERHEAD_TARGET_US = 100.0
LINEAR_TARGET = 1.3

# The sim judge's own cost per call: its generate() on the scorer's prompts made beforehand (the
# answer, its JSON text and usage: what a provider would do), timed alone.
JUDGE_COST = r'''
import asyncio, json, sys, time
from memjudge.formats import read_candidates, read_sources
from memjudge.judges import JudgeCall, make_judge
from memjudge.judges.panel import judge_config
from memjudge.judges.rubrics import load_rubric

cand, src, judges_file, spec, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
judge = make_judge(judge_config(spec, judges_file))
df = read_candidates(cand).head(n)
rub = load_rubric("support")
sources = dict(zip(*read_sources(src)[["persona_id", "source"]].to_numpy().T))
renderers = {p: rub.support_renderer(source=sources[p], persona_id=p) for p in dict.fromkeys(df["persona_id"])}
# the prompts as the scorer makes them (the judge reads their text: its length, for the usage)
calls = [JudgeCall(key=str(i), rubric=rub.id, prompt=renderers[p](t, c, a), schema=rub.model, replicate=r,
                   item={"assertion_id": a, "persona_id": p, "category": c})
         for i, (a, p, c, t) in enumerate(zip(df["assertion_id"], df["persona_id"], df["category"], df["text"])) for r in (0, 1)]
# The judge's fixed cost: what the scorer asks of it once per run (its identity, which hashes the
# truth file, and its former identities) and the truth file it reads at its first answer. A
# provider judge has neither; the sim judge's is its own cost, not the scorer's.
f0, fc0 = time.perf_counter(), time.process_time()
judge.call_identity("support"), list(judge.former_call_identities("support"))
judge.truth
fixed, fixed_cpu = time.perf_counter() - f0, time.process_time() - fc0

async def main():
    t0, c0 = time.perf_counter(), time.process_time()
    for call in calls:
        await judge.generate(call)
    return time.perf_counter() - t0, time.process_time() - c0

dt, cpu = min(asyncio.run(main()) for _ in range(3))
print(json.dumps({"calls": len(calls), "us_per_call": dt / len(calls) * 1e6, "cpu_us_per_call": cpu / len(calls) * 1e6,
                  "fixed_s": fixed, "fixed_cpu_s": fixed_cpu}))
'''


def env() -> dict:
    e = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    e["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + e.get("PYTHONPATH", "")
    e.pop("MEMJUDGE_CACHE_DIR", None)
    return e


def run_child(cmd: list[str], log: Path) -> tuple[float, float, float]:
    """(wall seconds, the child's own CPU seconds (user + system: what the load does not
    inflate as much), its own peak RSS in MiB); its output goes to `log`."""
    with open(log, "w") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env(), cwd=log.parent)
        _, status, usage = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(map(str, cmd))}\n{log.read_text()[-3000:]}")
    return dt, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # Linux: KiB


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def corpus(workdir: Path, personas: int, seed: int) -> tuple[Path, float | None]:
    """The simulated corpus (generated once per size and seed), and the seconds it took now."""
    folder = workdir / f"corpus-p{personas}-s{seed}"
    done = folder / ".complete"
    if done.is_file():
        return folder, None
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    dt, _, _ = run_child([sys.executable, "-m", "memjudge", "simulate", "--personas", str(personas), "--seed", str(seed),
                       "--out", str(folder)], workdir / f"simulate-p{personas}.log")
    done.write_text(f"{dt:.1f}\n")
    return folder, dt


def gold_file(folder: Path, every: int = 50) -> Path:
    """Hand labels stood in by the corpus's construction truth (its labels.jsonl) for every
    `every`-th candidate: a 2% sample, as `memjudge estimate --gold` reads it."""
    path = folder / f"gold-every{every}.jsonl"
    if not path.is_file():
        tmp = path.with_suffix(".tmp")
        with open(folder / "labels.jsonl") as f, open(tmp, "w") as out:
            for i, line in enumerate(f):
                if i % every == 0:
                    r = json.loads(line)
                    out.write(json.dumps({"assertion_id": r["assertion_id"], "verdict": r["verdict"], "annotator": "simulated"}) + "\n")
        tmp.replace(path)
    return path


def judges_file(folder: Path) -> Path:
    path = folder / "sim-judges.toml"
    path.write_text("".join(f'[[judge]]\nspec = "{spec}"\n[judge.options]\ntruth = "{folder}"\n\n' for spec in JUDGES))
    return path


def judge_cost_us(cand: Path, src: Path, jf: Path, n: int = 20000) -> dict:
    r = subprocess.run([sys.executable, "-c", JUDGE_COST, str(cand), str(src), str(jf), JUDGES[0], str(n)], capture_output=True,
                       text=True, env=env())
    if r.returncode != 0:
        raise SystemExit(f"failed: the sim judge's own cost\n{r.stderr}")
    return json.loads(r.stdout)


def pipeline(workdir: Path, n: int, seed: int, keep: bool) -> dict:
    personas = max(1, round(n / PER_PERSONA))
    folder, sim_s = corpus(workdir, personas, seed)
    cand, src = folder / "candidates.jsonl", folder / "sources.jsonl"
    candidates = count_lines(cand)
    jf = judges_file(folder)
    work = workdir / f"run-p{personas}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    mj = [sys.executable, "-m", "memjudge"]
    runs = {spec: work / spec.replace(":", "-") for spec in JUDGES}
    labels = {spec: runs[spec] / "labels.jsonl" for spec in JUDGES}
    main_run = runs[JUDGES[0]]
    rows = 2 * candidates
    steps: list[tuple[str, list[str], int, str]] = []
    for spec in JUDGES:
        steps.append((f"score {spec}", mj + ["score", str(cand), "--sources", str(src), "--judge", spec, "--judges-file", str(jf),
                                            "--replicates", "2", "--out", str(runs[spec]), "--cache-dir", str(work / f"cache-{spec[4:]}"),
                                            "--no-progress", "--quiet"], rows, "call"))
    steps += [
        ("noise", mj + ["noise", str(labels[JUDGES[0]]), "--out", str(main_run)], rows, "row"),
        ("agreement", mj + ["agreement", str(labels[JUDGES[0]]), str(labels[JUDGES[1]]), "--out", str(main_run)], 2 * rows, "row"),
        ("compare", mj + ["compare", str(cand), "--labels", str(labels[JUDGES[0]]), "--coverage", str(folder / "coverage.jsonl"),
                          "--gate", "values", "--out", str(main_run)], candidates, "cand."),
        ("estimate", mj + ["estimate", str(labels[JUDGES[0]]), "--gold", str(gold_file(folder)), "--out", str(main_run)], rows, "row"),
        ("report", mj + ["report", str(main_run), "--format", "md,html"], candidates, "cand."),
        ("view --export", mj + ["view", str(main_run), "--export", str(work / "view.html")], candidates, "cand."),
    ]
    out = {"n": n, "personas": personas, "candidates": candidates, "simulate_s": sim_s, "steps": []}
    for name, cmd, units, unit in steps:
        dt, cpu, peak = run_child(cmd, work / f"{name.replace(' ', '_').replace(':', '-')}.log")
        out["steps"].append({"step": name, "seconds": dt, "cpu_s": cpu, "peak_mib": peak, "units": units, "unit": unit})
        print(f"  [{candidates} candidates] {name}: {dt:.1f} s (CPU {cpu:.1f} s), {peak:.0f} MiB", file=sys.stderr, flush=True)
    cost = judge_cost_us(cand, src, jf)
    out["judge_us_per_call"], out["judge_cpu_us_per_call"] = cost["us_per_call"], cost["cpu_us_per_call"]
    out["judge_fixed_s"], out["judge_fixed_cpu_s"] = cost["fixed_s"], cost["fixed_cpu_s"]
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return out


def table(results: list[dict]) -> list[str]:
    lines = []
    prev = None
    for res in results:
        sim = f"{res['simulate_s']:.1f} s" if res["simulate_s"] is not None else "cached"
        lines.append(f"{res['candidates']:,} candidates ({res['personas']:,} personas; simulate {sim}), two replicates:")
        head = f"  {'step':<18}{'time s':>9}{'CPU s':>8}{'peak MiB':>10}{'us/unit':>10}  unit  "
        if prev is not None:
            head += f"{'linear':>7}{'CPU':>6}  (time, CPU time per unit / at {prev['candidates']:,})"
        lines.append(head)
        before = {s["step"]: s for s in prev["steps"]} if prev else {}
        for s in res["steps"]:
            per = s["seconds"] / s["units"] * 1e6
            line = f"  {s['step']:<18}{s['seconds']:9.1f}{s.get('cpu_s', float('nan')):8.1f}{s['peak_mib']:10.0f}{per:10.1f}  {s['unit']:<5} "
            if s["step"] in before:
                b = before[s["step"]]
                ratio = per / (b["seconds"] / b["units"] * 1e6)
                cpu_ratio = (s["cpu_s"] / s["units"]) / (b["cpu_s"] / b["units"]) if b.get("cpu_s") else float("nan")
                line += f"{ratio:7.2f}{cpu_ratio:6.2f}" + ("" if ratio <= LINEAR_TARGET else "  over 1.3")
            lines.append(line)
        peak = max(s["peak_mib"] for s in res["steps"])
        lines.append(f"  peak of every step: {peak:.0f} MiB (target <= {MEMORY_TARGET_MIB} MiB: {'met' if peak <= MEMORY_TARGET_MIB else 'NOT met'})")
        score = res["steps"][0]
        calls = score["units"]
        first = score["seconds"] / calls * 1e6
        judge, fixed = res["judge_us_per_call"], res.get("judge_fixed_s", 0.0)
        judge_all = judge + fixed / calls * 1e6
        lines.append(f"  the sim judge's own cost: generate() {judge:.1f} us per call, and once per run {fixed:.1f} s (its identity, "
                     f"which hashes truth.jsonl, and reading that file): {judge_all:.1f} us per call in all")
        lines.append(f"  score, first run: {first:.1f} us per call; beyond the judge: {first - judge_all:.1f} us per call "
                     f"(target <= {OVERHEAD_TARGET_US:.0f}; {first - judge:.1f} beyond its generate() alone)")
        if prev is not None:
            p = prev["steps"][0]
            span = calls - p["units"]
            marginal = (score["seconds"] - p["seconds"]) / span * 1e6
            judge_marginal = judge + (fixed - prev.get("judge_fixed_s", 0.0)) / span * 1e6
            lines.append(f"  score, marginal (from {p['units']:,} to {calls:,} calls): {marginal:.1f} us per call; "
                         f"beyond the judge: {marginal - judge_marginal:.1f} us per call (target <= {OVERHEAD_TARGET_US:.0f}; "
                         f"{marginal - judge:.1f} beyond its generate() alone)")
            cpu_marginal = (score["cpu_s"] - p["cpu_s"]) / span * 1e6
            cpu_judge = res["judge_cpu_us_per_call"]
            cpu_judge_marginal = cpu_judge + (res.get("judge_fixed_cpu_s", 0.0) - prev.get("judge_fixed_cpu_s", 0.0)) / span * 1e6
            lines.append(f"  the same in CPU time: marginal {cpu_marginal:.1f} us per call, the judge's own {cpu_judge_marginal:.1f} "
                         f"(generate() {cpu_judge:.1f}); beyond the judge: {cpu_marginal - cpu_judge_marginal:.1f} us per call")
        prev = res
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100000,1000000", help="comma list of candidate counts, smallest first")
    ap.add_argument("--workdir", required=True, help="folder for the generated corpora (kept and reused) and the runs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the run folders (default: removed after each size)")
    ap.add_argument("--save", action="store_true", help="also write the report to bench/results/scale.txt")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    stamp = time.strftime("%Y-%m-%d %H:%M %Z")
    results = [pipeline(workdir, n, args.seed, args.keep) for n in sizes]
    load1 = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"results": results, "load_avg_1m": [load0, load1], "cpus": os.cpu_count(), "date": stamp}, indent=2))
        return 0
    text = "\n".join([f"{stamp}, load average {load0:.2f} at the start, {load1:.2f} at the end, on {os.cpu_count()} CPUs "
                      f"(a shared machine)", ""] + table(results))
    print(text)
    if args.save:
        path = ROOT / "bench" / "results" / "scale.txt"
        path.write_text(f"python bench/scale.py {' '.join(argv if argv is not None else sys.argv[1:])}\n{text}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
