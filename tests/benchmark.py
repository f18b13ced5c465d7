"""Time the matrix: what it runs, where the time goes, and how it grows per resource.

    python3 -m uv run python -m tests.benchmark             # the full matrix
    python3 -m uv run python -m tests.benchmark --growth    # every cut from 6 resources up
    python3 -m uv run python -m tests.benchmark --growth --sizes 8,10,12   # those cuts only

Each run is ``pytest tests/test_matrix.py`` in a process of its own, from an empty
ledger, with the workers given by ``-n`` (default ``auto``, as ``pytest`` runs:
two per core).  It prints the combinations,
the distinct checks run per kind (the ledger's records), wall time, CPU time of
the whole process tree, its peak memory (the sum of the proportional set sizes
of every process of the run, sampled every 0.2 s), and the wall time each kind of work
took, summed over workers.  Timings are for reading, never for asserting: the
figures of one run are compared with each other.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from tests.matrix import ROOT, full_matrix, registry_keys, sample_matrix


def _proportional_size(process: psutil.Process) -> int:
    """Its proportional set size: shared pages count once over all who share them.

    A fork shares its pages with its parent, so adding resident sizes would count
    the preloaded servers' pages once per child.
    """
    try:
        with open(f"/proc/{process.pid}/smaps_rollup", encoding="ascii") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(process.memory_info().rss)
    except psutil.Error:
        return 0


def _tree_memory(process: psutil.Process) -> int:
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0
    return sum(_proportional_size(member) for member in members)


def _adopt_orphans() -> None:
    """Become the subreaper of the run (Linux): its orphans' CPU time is then ours.

    ``RUSAGE_CHILDREN`` counts only descendants that were waited for; a process
    whose parent ended first (multiprocessing's forkserver, for one) would go to
    init with its CPU time.  As subreaper, this process adopts and reaps them.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_child_subreaper = 36
    if libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _reap_orphans(keep: int) -> None:
    """Wait for every adopted orphan that has ended (never for *keep*, the run)."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid == keep:
            return
        os.waitpid(info.si_pid, 0)


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
                peak = max(peak, _tree_memory(watched))
                _reap_orphans(keep=process.pid)

        sampler = threading.Thread(target=sample_memory, daemon=True)
        sampler.start()
        output, _ = process.communicate()
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
        deadline = time.monotonic() + 10  # orphans still ending: wait for them a while
        while time.monotonic() < deadline:
            _reap_orphans(keep=process.pid)
            try:
                os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            time.sleep(0.1)
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


def profile_renders(count: int) -> None:
    """Copier's render of the all-resources project against the matrix's, *count* times.

    The matrix's renders (``tests/rendering.py``) render a file again only where
    the values it reads changed: the figure for all the combinations of the
    registry, in matrix order, says what a combination costs on average.
    """
    import copier

    from tests.conftest import copy_template
    from tests.matrix import MAIN_BASE, Combination, full_matrix
    from tests.rendering import TemplateRenderer, add_capture

    answers = Combination(registry_keys(), True, True).answers()
    with tempfile.TemporaryDirectory(prefix="render-profile-") as folder:
        template = Path(folder, "template")
        template.mkdir()
        copy_template(template)
        add_capture(template)
        copies = itertools.count()

        def copy(given: dict[str, object]) -> Path:
            destination = Path(folder, f"copy-{next(copies)}")
            copier.run_copy(
                str(template), str(destination), data=given, defaults=True, unsafe=True, quiet=True
            )
            return destination

        timings = []
        for _ in range(count):
            start = time.perf_counter()
            copy(answers)
            timings.append(time.perf_counter() - start)
        print(
            f"render, copier copy: median {statistics.median(timings) * 1000:.1f} ms, "
            f"min {min(timings) * 1000:.1f} ms over {count}"
        )
        start = time.perf_counter()
        renderer = TemplateRenderer(template, MAIN_BASE.answers(), copy)
        setup = time.perf_counter() - start
        timings = []
        for _ in range(count):
            start = time.perf_counter()
            renderer.files(answers)
            timings.append(time.perf_counter() - start)
        combos = [combo for combo in full_matrix() if combo.base() == MAIN_BASE]
        start = time.perf_counter()
        for combo in combos:
            renderer.files(combo.answers())
        sweep = time.perf_counter() - start
        again = statistics.median(timings) * 1000
        print(
            f"render, the matrix's renderer: set up in {setup:.1f} s (one copier copy and "
            f"every template parsed); the same project again {again:.1f} ms; every "
            f"combination in turn {sweep / len(combos) * 1000:.1f} ms each "
            f"({len(combos)} in {sweep:.1f} s)"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "-n", "--workers", default="auto", help="xdist workers (default auto: two per core)"
    )
    parser.add_argument(
        "--growth",
        action="store_true",
        help="run the matrix cut to 6 resources, 7, ... up to the whole registry",
    )
    parser.add_argument(
        "--sizes",
        help="with --growth, only these numbers of resources (comma-separated: 6,9,12)",
    )
    parser.add_argument("--sample", action="store_true", help="the sample matrix instead")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument(
        "--profile-render",
        type=int,
        metavar="N",
        help="only profile N in-process renders of the all-resources project",
    )
    args = parser.parse_args(argv)
    if args.profile_render:
        profile_renders(args.profile_render)
        return
    _adopt_orphans()
    keys = registry_keys()
    sizes = list(range(min(6, len(keys)), len(keys) + 1))
    if args.sizes:
        sizes = sorted({min(int(size), len(keys)) for size in args.sizes.split(",")})
    cuts = [keys[:size] for size in sizes] if args.growth else [keys]
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
        first, last = results[0], results[-1]
        steps = last.resources - first.resources
        print(
            f"  per added resource, {first.resources} to {last.resources} (geometric mean): "
            f"x{(last.wall_s / first.wall_s) ** (1 / steps):.2f} wall, "
            f"x{(last.cpu_s / first.cpu_s) ** (1 / steps):.2f} CPU"
        )
    if args.json:
        print(json.dumps([asdict(figures) for figures in results], indent=2))


if __name__ == "__main__":
    main()
