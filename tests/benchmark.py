"""Time the matrix: what it runs, where the time goes, and how it grows per resource.

    python3 -m uv run python -m tests.benchmark             # the full matrix
    python3 -m uv run python -m tests.benchmark --growth    # and the 6- and 7-resource cuts

Each run is ``pytest tests/test_matrix.py`` in a process of its own, from an empty
ledger, with the workers given by ``-n`` (default 2).  It prints the combinations,
the distinct checks run per kind (the ledger's records), wall time, CPU time of
the whole process tree, its peak memory (the sum of the resident sizes of every
process of the run, sampled every 0.2 s), and the wall time each kind of work
took, summed over workers.  Timings are for reading, never for asserting: the
figures of one run are compared with each other.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from tests.matrix import ROOT, full_matrix, registry_keys, sample_matrix


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            continue
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Figures:
    """What one run of the matrix cost, and what it ran."""

    resources: int
    combinations: int
    wall_s: float
    cpu_s: float
    peak_memory_mib: int
    distinct_checks: dict[str, int]
    spent_s: dict[str, tuple[float, int]]
    pytest: str


def run_matrix(keys: tuple[str, ...], workers: str, sample: bool) -> Figures:
    """Run the matrix of *keys* once; its figures."""
    with tempfile.TemporaryDirectory(prefix="matrix-benchmark-") as folder:
        base, timings = Path(folder, "base"), Path(folder, "timings")
        timings.mkdir()
        command = [
            sys.executable,
            "-m",
            "pytest",
            "tests/test_matrix.py",
            "-q",
            "-n",
            workers,
            "--basetemp",
            str(base),
            "--matrix-keys",
            ",".join(keys),
            "--matrix",
            "sample" if sample else "full",
        ]
        env = {**os.environ, "MATRIX_TIMINGS": str(timings)}
        cpu_before = _children_cpu()
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        watched = psutil.Process(process.pid)
        peak = 0
        done = threading.Event()

        def sample_memory() -> None:
            nonlocal peak
            while not done.wait(0.2):
                peak = max(peak, _tree_rss(watched))

        sampler = threading.Thread(target=sample_memory, daemon=True)
        sampler.start()
        output, _ = process.communicate()
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
        cpu = _children_cpu() - cpu_before
        summary = output.strip().splitlines()[-1] if output.strip() else ""
        if process.returncode != 0:
            raise SystemExit(f"the matrix failed (exit {process.returncode}):\n{output[-4000:]}")
        ledger = base / "ledger"
        checks = {
            kind.name: sum(1 for record in kind.iterdir() if not record.name.startswith("."))
            for kind in sorted(ledger.iterdir())
        }
        spent: dict[str, list[float]] = {}
        for part in timings.glob("*.json"):
            for kind, (seconds, runs) in json.loads(part.read_text(encoding="utf-8")).items():
                total = spent.setdefault(kind, [0.0, 0])
                total[0] += seconds
                total[1] += runs
    matrix = sample_matrix(keys) if sample else full_matrix(keys)
    return Figures(
        resources=len(keys),
        combinations=len(matrix),
        wall_s=round(wall, 1),
        cpu_s=round(cpu, 1),
        peak_memory_mib=round(peak / 2**20),
        distinct_checks=checks,
        spent_s={kind: (round(seconds, 1), int(runs)) for kind, (seconds, runs) in spent.items()},
        pytest=summary,
    )


def report(figures: Figures) -> None:
    print(
        f"\n{figures.resources} resources: {figures.combinations} combinations, "
        f"wall {figures.wall_s} s, CPU {figures.cpu_s} s, "
        f"peak memory {figures.peak_memory_mib} MiB ({figures.pytest})"
    )
    print("  distinct checks run, per kind (ledger records):")
    for kind, count in figures.distinct_checks.items():
        print(f"    {kind:<24} {count:>6}")
    print("  wall time per kind of work, summed over workers (seconds, runs):")
    for kind, (seconds, runs) in sorted(figures.spent_s.items(), key=lambda item: -item[1][0]):
        print(f"    {kind:<24} {seconds:>8} s {runs:>6} runs")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--workers", default="2", help="xdist workers (default 2)")
    parser.add_argument(
        "--growth", action="store_true", help="also run the matrix cut to 6 and 7 resources"
    )
    parser.add_argument("--sample", action="store_true", help="the sample matrix instead")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)
    keys = registry_keys()
    cuts = [keys[:6], keys[:7], keys] if args.growth else [keys]
    results = []
    for cut in cuts:
        figures = run_matrix(cut, args.workers, args.sample)
        report(figures)
        results.append(figures)
    if len(results) > 1:
        print("\ngrowth of the wall time per added resource:")
        for before, after in itertools.pairwise(results):
            print(
                f"  {before.resources} -> {after.resources} resources: "
                f"x{after.wall_s / before.wall_s:.2f} wall, x{after.cpu_s / before.cpu_s:.2f} CPU, "
                f"for x{after.combinations / before.combinations:.2f} combinations"
            )
    if args.json:
        print(json.dumps([asdict(figures) for figures in results], indent=2))


if __name__ == "__main__":
    main()
