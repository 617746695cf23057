"""How llama.cpp's OpenMP threads wait between evaluations, and what it costs the embedded judge.

    python bench/omp_wait.py [--items 10] [--repeats 1] [--save]
    python bench/omp_wait.py --server [--items 10] [--repeats 1] [--save]

llama-cpp-python's CPU backend runs each evaluation in an OpenMP team (libgomp). Between two
evaluations libgomp's threads spin by default, so the cores stay busy while Python does the
work in between (tokens, the next prompt, the premise check's sentences) and while any other
process wants them. memjudge imports llama_cpp with OMP_WAIT_POLICY=PASSIVE unless the
environment sets it (memjudge.judges.local.OMP_WAIT_POLICY); this benchmark measures why.

`memjudge score` with `local:qwen2.5-coder-1.5b` (the premise check on: the demo's setting) on
the first `--items` candidates of a simulated persona, each from an empty answer cache, in its own
process, under four conditions: OMP_WAIT_POLICY unset (libgomp's default: spin, then sleep) or
PASSIVE, alone or beside one busy process (a Python loop at the same priority: what another test
worker or another job is). It prints wall and CPU seconds per condition, the ratios default /
passive, and checks that both give the same judge_score on every row (scores are bit-identical:
the same arithmetic on the same threads). Needs the [local] extra. `--save` writes the report,
with the date and the load, to bench/results/omp_wait.txt.

`--server` asks the same of llama.cpp's own OpenAI-compatible server instead (`python -m
llama_cpp.server` on the packaged model, started anew per condition with OMP_WAIT_POLICY unset or
PASSIVE, the one thing that differs): `memjudge score --judge openai:... --base-url` with the
support rubric and no log-probabilities (tests/test_llama_server.py's setting), from an empty
answer cache. A server generates its answer a token at a time, each an evaluation of its own, so
the policy's cost or gain can differ from the embedded judge's, which evaluates prompts and reads
one next-token distribution. It compares verdicts (greedy generation: the same on both).
`--save` writes bench/results/omp_wait_server.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUDGE = "local:qwen2.5-coder-1.5b"


def _corpus(folder: Path, items: int) -> tuple[Path, Path]:
    from memjudge.simulation import simulate

    c = simulate("paper", seed=0, personas=2)
    cands, srcs = folder / "candidates.jsonl", folder / "sources.jsonl"
    c.candidates.head(items).to_json(cands, orient="records", lines=True)
    c.sources.to_json(srcs, orient="records", lines=True)
    return cands, srcs


def _score(folder: Path, cands: Path, srcs: Path, policy: str | None, tag: str) -> tuple[float, float, list]:
    """One `memjudge score` process from an empty answer cache: (wall s, CPU s of the process, scores)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    else:
        # memjudge's setdefault keeps an empty value, which libgomp rejects (it says so on stderr)
        # and so keeps its default: the behaviour before memjudge set the variable.
        env["OMP_WAIT_POLICY"] = ""
    panel = folder / "judges.toml"
    panel.write_text(f'[[judge]]\nspec = "{JUDGE}"\n[judge.options]\ncheck = true\n')
    out, cache = folder / f"run-{tag}", folder / f"cache-{tag}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memjudge", "score", str(cands), "--sources", str(srcs), "--judge", JUDGE,
                    "--judges-file", str(panel), "--out", str(out), "--cache-dir", str(cache), "--no-progress"],
                   env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    scores = [json.loads(line)["judge_score"] for line in (out / "labels.jsonl").read_text().splitlines()]
    return wall, cpu, scores


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _policy_env(policy: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    return env


def _serve_and_score(folder: Path, cands: Path, srcs: Path, policy: str | None, tag: str) -> tuple[float, float, list]:
    """A fresh llama.cpp server under `policy`, one `memjudge score` against it from an empty
    answer cache: (wall s of the scoring, CPU s of the server meanwhile, verdicts)."""
    import urllib.request

    from memjudge.judges.local import packaged_model_path

    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    threads = str(min(2, os.cpu_count() or 1))
    log = open(folder / f"server-{tag}.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(packaged_model_path()),
                               "--chat_format", "chatml", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
                               "--n_threads", threads, "--n_threads_batch", threads, "--verbose", "False"],
                              stdout=log, stderr=subprocess.STDOUT, env=_policy_env(policy))
    try:
        deadline = time.monotonic() + 600
        while True:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start: {(folder / f'server-{tag}.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5):
                    break
            except OSError:
                time.sleep(0.5)
        panel = folder / "judges-server.toml"
        panel.write_text('[[judge]]\nspec = "openai:qwen-local"\ntimeout_s = 900\nmax_output_tokens = 400\nlogprobs = false\n')
        out, cache = folder / f"run-{tag}", folder / f"cache-{tag}"
        cpu0 = _cpu_of(server.pid)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "memjudge", "score", str(cands), "--sources", str(srcs), "--judge",
                        "openai:qwen-local", "--base-url", url, "--judges-file", str(panel), "--concurrency", "4",
                        "--out", str(out), "--cache-dir", str(cache), "--no-progress"],
                       env={k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"OPENAI_API_KEY": "none"},
                       check=True, capture_output=True)
        wall = time.perf_counter() - t
        cpu = _cpu_of(server.pid) - cpu0
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()
    verdicts = [json.loads(line)["verdict"] for line in (out / "labels.jsonl").read_text().splitlines()]
    return wall, cpu, verdicts


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=1, help="best of this many runs per condition")
    ap.add_argument("--save", action="store_true")
    ap.add_argument("--server", action="store_true", help="llama.cpp's OpenAI-compatible server instead of the embedded judge")
    args = ap.parse_args()
    run = _serve_and_score if args.server else _score
    os.environ.setdefault("MEMJUDGE_CACHE_DIR", str(Path.home() / ".cache" / "memjudge"))  # the verified model
    lines = [f"# bench/omp_wait.py{' --server' if args.server else ''} --items {args.items} --repeats {args.repeats}",
             f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load before {os.getloadavg()[0]:.2f}, "
             f"{os.cpu_count()} cores, commit {_commit()}"]
    results: dict[tuple[str, bool], tuple[float, float]] = {}
    scores: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cands, srcs = _corpus(folder, args.items)
        run(folder, cands, srcs, "PASSIVE", "warm")  # the weights joined and verified, the file in the page cache
        for busy in (False, True):
            spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
            try:
                for policy in (None, "PASSIVE"):
                    runs = [run(folder, cands, srcs, policy, f"{policy}-{busy}-{i}") for i in range(args.repeats)]
                    wall, cpu, s = min(runs)
                    results[(policy or "default", busy)] = (wall, cpu)
                    scores.setdefault(policy or "default", s)
            finally:
                if spinner is not None:
                    spinner.kill()
                    spinner.wait()
    lines.append(f"{'condition':<34} {'wall s':>8} {'CPU s':>8} {'s/item':>8}"
                 + ("   (CPU: the server's while it answered)" if args.server else ""))
    for (policy, busy), (wall, cpu) in results.items():
        lines.append(f"{policy + (', beside a busy process' if busy else ', alone'):<34} {wall:8.1f} {cpu:8.1f} "
                     f"{wall / args.items:8.2f}")
    for busy in (False, True):
        d, p = results[("default", busy)], results[("PASSIVE", busy)]
        lines.append(f"default / PASSIVE, {'beside a busy process' if busy else 'alone'}: wall {d[0] / p[0]:.2f} x, "
                     f"CPU {d[1] / p[1]:.2f} x")
    lines.append(f"same {'verdict' if args.server else 'judge_score'} on every row: {scores['default'] == scores['PASSIVE']}")
    lines.append(f"# load after {os.getloadavg()[0]:.2f}")
    text = "\n".join(lines)
    print(text)
    if args.save:
        (ROOT / "bench" / "results" / ("omp_wait_server.txt" if args.server else "omp_wait.txt")).write_text(text + "\n")


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


if __name__ == "__main__":
    main()
