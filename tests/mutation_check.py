"""Mutation check: do the leak tests catch a broken context manager?

One mutant at a time, either deletes a single release call (``close()``,
``release()``, ``kill()``, ...) from a module or makes one ``__exit__``/``__aexit__``
return ``True`` (swallowing exceptions), and runs the tests that cover it.  A
resource module's mutants are made in a project rendered with every resource (and
asyncio variants), and run against its own generated test file.  The runtime's
mutants are made in a copy of ``template/src/{{ package_name }}/_runtime/`` and
run against the runtime's own suite (``tests/runtime/``): ``test_helpers.py`` for
``helpers`` and ``async_helpers``, ``test_testing.py`` for the toolkit, and the
whole suite for the contract core (``_resource`` and ``_async_resource``).  A
mutant is *caught* when the tests fail (or hang past the timeout).

    uv run python -m tests.mutation_check [--only MODULE] [--timeout 120] [--python 3.12]

Prints one line per mutant and a summary; exits 1 if any mutant survived.  Not part
of the default test run: it takes a few minutes per resource.
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import copier

from tests.conftest import (
    RUNTIME_SUITE,
    dev_environment,
    environment_of,
    run_in,
    runtime_suite_env,
    runtime_suite_requirements,
    tool_env,
)
from tests.matrix import PACKAGE, ROOT, RUNTIME_PYTHON, TEMPLATE_RUNTIME, find_python, registry

RELEASE_METHODS = frozenset(
    {
        "close",
        "aclose",
        "abort",
        "release",
        "shutdown",
        "terminate",
        "kill",
        "wait",
        "unlink",
        "rmtree",
        "_rmtree",
        "rmdir",
        "rollback",
        "join",
        "wait_closed",
        "server_close",
        "cancel",
        "discard",
        "_close",
        "_release",
        "_release_all",
        "_release_now",
        "_close_now",
        "_finish",
        "release_fully",
        "_release_fully",
        "release_made",
        "_reap",
        "_discard",
        "_close_all",
        "_close_descriptor",
        "_close_last",
        "_close_socket",
        "_shutdown",
        "_kill",
        "_terminate",
        "_cleanup",
        "communicate",
    }
)


@dataclass(frozen=True)
class Mutant:
    module: str
    line: int
    kind: str
    description: str
    source: str


def _called_method(node: ast.stmt) -> str | None:
    value = node.value if isinstance(node, ast.Expr) else None
    if isinstance(value, ast.Await):
        value = value.value
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in RELEASE_METHODS:
            return name
    return None


def mutants_of(module: str, source: str) -> list[Mutant]:
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and (method := _called_method(node)):
            start, end = node.lineno - 1, (node.end_lineno or node.lineno)
            indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
            mutated = [*lines[:start], f"{indent}pass  # mutant\n", *lines[end:]]
            text = ast.get_source_segment(source, node) or method
            found.append(
                Mutant(module, node.lineno, "delete", text.splitlines()[0][:70], "".join(mutated))
            )
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in {
            "__exit__",
            "__aexit__",
        }:
            last = node.body[-1]
            end = last.end_lineno or last.lineno
            body_first = node.body[0]
            first_indent = " " * body_first.col_offset
            mutated = [
                *lines[: body_first.lineno - 1],
                f"{first_indent}try:\n",
                *(
                    f"    {line}" if line.strip() else line
                    for line in lines[body_first.lineno - 1 : end]
                ),
                f"{first_indent}finally:\n",
                f"{first_indent}    return True  # mutant: swallow\n",
                *lines[end:],
            ]
            found.append(
                Mutant(
                    module, node.lineno, "swallow", f"{node.name} returns True", "".join(mutated)
                )
            )
    return found


def render(destination: Path, python_min: str = "3.11") -> Path:
    copier.run_copy(
        str(ROOT),
        destination,
        data={
            "package_name": PACKAGE,
            "resources": [resource.key for resource in registry.RESOURCES],
            "async_support": True,
            "docs": False,
            "python_min": python_min,
        },
        defaults=True,
        unsafe=True,
        quiet=True,
        vcs_ref="HEAD",
    )
    return destination


TOOLKIT_MODULES = (
    "_runtime/_process",
    "_runtime/snapshot",
    "_runtime/leak_check",
    "_runtime/fd_limit",
    "_runtime/_faults",
    "_runtime/conformance",
    "_runtime/async_conformance",
)
"""The leak and contract toolkit (``testing`` names its tools): ``test_testing.py``."""
CORE_MODULES = (
    "_runtime/helpers",
    "_runtime/async_helpers",
    "_runtime/_pools",
    *TOOLKIT_MODULES,
)
"""Runtime modules whose mutants are checked after the resources'."""
CONTRACT_MODULES = ("_runtime/_resource", "_runtime/_async_resource")
"""The contract, which every class shares: the runtime's whole suite covers it."""
RUNTIME_PREFIX = f"{registry.RUNTIME}/"


@dataclass(frozen=True)
class Target:
    """Where a module's mutants are written, and how its tests run."""

    src: Path
    """The folder that holds the module (``<module>.py`` below it)."""
    cwd: Path
    python: Path
    env: dict[str, str] | None


def tests_of(module: str) -> list[str]:
    """The test files that cover *module* (a path below the package)."""
    if module in CONTRACT_MODULES:
        return [str(RUNTIME_SUITE)]
    if module == "_runtime/async_helpers":
        return [str(RUNTIME_SUITE / "test_helpers.py")]
    if module in TOOLKIT_MODULES:
        return [str(RUNTIME_SUITE / "test_testing.py")]
    name = module.rpartition("/")[2]
    if module.startswith(RUNTIME_PREFIX):  # _runtime/_pools: test_pools.py
        return [str(RUNTIME_SUITE / f"test_{name.lstrip('_')}.py")]
    return [f"tests/test_{name}.py"]


def run_tests(target: Target, module: str, timeout: float, *, baseline: bool = False) -> str:
    command = [
        str(target.python),
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        *tests_of(module),
    ]
    try:
        result = run_in(target.cwd, command, timeout, env=target.env)
    except subprocess.TimeoutExpired:
        if baseline:
            sys.exit(f"the unmutated tests of {module} run past {timeout} s")
        return "caught (hung)"
    if baseline and result.returncode != 0:
        output = result.stdout[-6000:] + result.stderr[-3000:]
        sys.exit(f"the unmutated tests of {module} fail:\n{output}")
    return "survived" if result.returncode == 0 else "caught"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="module name (repeatable)")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument(
        "--python",
        default=RUNTIME_PYTHON,
        help="the project's python_min, and the Python its tests run on "
        "(default: this one; 3.12 reaches sqlite's autocommit branches)",
    )
    options = parser.parse_args()
    found = find_python(options.python)
    if found is None:
        parser.error(f"no Python {options.python} on this machine")
    with tempfile.TemporaryDirectory() as temp:
        modules = options.only or [
            *(resource.module for resource in registry.RESOURCES),
            *CORE_MODULES,
            *CONTRACT_MODULES,
        ]
        targets: dict[bool, Target] = {}
        if any(module.startswith(RUNTIME_PREFIX) for module in modules):
            copy = Path(temp) / "runtime" / registry.RUNTIME
            shutil.copytree(TEMPLATE_RUNTIME, copy, ignore=shutil.ignore_patterns(".*", "__*__"))
            python = found
            if found != Path(sys.executable):
                python = environment_of(found, runtime_suite_requirements(), Path(temp))
            env = {**runtime_suite_env(copy), "PYTHONDONTWRITEBYTECODE": "1"}
            targets[True] = Target(copy.parent, ROOT, python, env)
        if not all(module.startswith(RUNTIME_PREFIX) for module in modules):
            project = render(Path(temp) / "project", options.python)
            python = found
            if found != Path(sys.executable):
                python = dev_environment(found, project, Path(temp))
            # As installed (uv sync) and as the matrix runs it: every interpreter
            # the suite starts finds the package, multiprocessing's fork server
            # among them, which preloads it without its parent's sys.path.
            env = {**tool_env(), "PYTHONPATH": str(project / "src")}
            targets[False] = Target(project / "src" / PACKAGE, project, python, env)
        for module in modules:
            run_tests(
                targets[module.startswith(RUNTIME_PREFIX)], module, options.timeout, baseline=True
            )
        totals: dict[str, int] = {}
        survivors = []
        for module in modules:
            target = targets[module.startswith(RUNTIME_PREFIX)]
            path = target.src / f"{module}.py"
            original = path.read_text(encoding="utf-8")
            for mutant in mutants_of(module, original):
                path.write_text(mutant.source, encoding="utf-8")
                started = time.monotonic()
                outcome = run_tests(target, module, options.timeout)
                elapsed = time.monotonic() - started
                path.write_text(original, encoding="utf-8")
                totals[outcome.split()[0]] = totals.get(outcome.split()[0], 0) + 1
                print(
                    f"{outcome:14} {module}.py:{mutant.line} [{mutant.kind}] "
                    f"{mutant.description} ({elapsed:.1f} s)",
                    flush=True,
                )
                if outcome == "survived":
                    survivors.append(mutant)
        print(
            f"mutants: {sum(totals.values())}, caught: {totals.get('caught', 0)}, "
            f"survived: {totals.get('survived', 0)}"
        )
    return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main())
