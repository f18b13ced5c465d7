"""Fixtures of the template's own tests: the matrix, renders, tools and the ledger."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.matrix import ROOT, CheckLedger, Combination, full_matrix, sample_matrix

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_copie.plugin import Copie

BIN = Path(sys.executable).parent
TEMPLATE_PARTS = ("copier.yml", "template", "extensions")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--matrix",
        choices=("full", "sample"),
        default="full",
        help="full: every combination of answers (the default, what CI runs); "
        "sample: no resource, each resource alone, all resources, and the other choices",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "combo" in metafunc.fixturenames:
        matrix = full_matrix() if metafunc.config.getoption("matrix") == "full" else sample_matrix()
        metafunc.parametrize(
            "combo",
            [pytest.param(c, id=c.id, marks=pytest.mark.xdist_group(c.id)) for c in matrix],
        )


def _combo_of(item: pytest.Item) -> Combination | None:
    callspec = getattr(item, "callspec", None)
    combo = callspec.params.get("combo") if callspec is not None else None
    return combo if isinstance(combo, Combination) else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests of one combination back to back, so they share one render."""
    order: dict[Combination, int] = {}
    for item in items:
        combo = _combo_of(item)
        if combo is not None:
            order.setdefault(combo, len(order))

    def position(item: pytest.Item) -> int:
        combo = _combo_of(item)
        return -1 if combo is None else order[combo]

    items.sort(key=position)


def _shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder shared by every xdist worker of this session (basetemp's parent)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def template_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template as it is in the working tree, copied into a plain folder.

    Rendering from a plain folder is twice as fast as from a git repository and
    includes uncommitted changes without copier's dirty-repository warning.
    """
    return copy_template(tmp_path_factory.mktemp("template"))


def copy_template(folder: Path) -> Path:
    """Copy the template's parts, as they are in the working tree, into *folder*."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in TEMPLATE_PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, folder / part, ignore=ignore)
        else:
            shutil.copy2(source, folder / part)
    return folder


@pytest.fixture(scope="session")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> CheckLedger:
    return CheckLedger(_shared_root(tmp_path_factory) / "ledger")


@pytest.fixture(scope="session")
def render(copie_session: Copie, template_snapshot: Path) -> Callable[[Combination], Path]:
    """Render a combination once per worker (its tests share one xdist group)."""
    cache: dict[Combination, Path] = {}

    def _render(combo: Combination) -> Path:
        if combo not in cache:
            result = copie_session.copy(
                extra_answers=combo.answers(), template_dir=template_snapshot
            )
            if result.exit_code != 0 or result.project_dir is None:
                raise AssertionError(f"render of {combo.id} failed: {result.exception!r}")
            cache.clear()  # the group's tests run back to back: keep one render
            cache[combo] = result.project_dir
        return cache[combo]

    return _render


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache per worker: incremental runs re-check only changed modules."""
    return tmp_path_factory.mktemp("mypy-cache")


GENERATED_PYTEST_PLUGINS = ("pytest_cov.plugin", "pytest_timeout", "_hypothesis_pytestplugin")
"""The pytest plugins of the generated projects' dev group, loaded by name below."""


def tool_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    # This environment's own plugins (pytest-copie, xdist) stay out of the generated
    # suites; the generated projects' plugins are named instead.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTEST_PLUGINS"] = ",".join(GENERATED_PYTEST_PLUGINS)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["NO_COLOR"] = "1"
    return env


def run_in(project: Path, command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run *command* in *project* with the tools' environment, capturing its output.

    It runs in a session of its own, killed whole once it ends, times out or is
    interrupted, so that no process it started (a hung test, a spawned child)
    outlives it.
    """
    with subprocess.Popen(
        command,
        cwd=project,
        env=tool_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@pytest.fixture(scope="session")
def run_tool() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run a tool of this environment in a project; fail with its output if it fails."""

    def _run(
        project: Path, tool: str, *args: str, timeout: float = 600, python: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        interpreter = str(python or sys.executable)
        command = [str(BIN / tool), *args] if tool != "python" else [interpreter, *args]
        result = run_in(project, command, timeout)
        if result.returncode != 0:
            pytest.fail(
                f"{' '.join(command)} failed in {project} (exit {result.returncode}):\n"
                f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}",
                pytrace=False,
            )
        return result

    return _run


@pytest.fixture(scope="session")
def suite_python(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Combination, Path], Path]:
    """The interpreter that runs a combination's own suite, with its dev group installed.

    This environment's Python for its own version.  For another version (a
    ``python_min`` of 3.12 or 3.13 on a 3.11 machine), a virtual environment of
    that interpreter with the rendered project's ``dev`` dependency group, made
    once per session (under a lock shared by the xdist workers) and keyed by that
    group's content, so a combination never runs with another group's packages.
    """
    root = _shared_root(tmp_path_factory)

    def _python(combo: Combination, project: Path) -> Path:
        found = combo.python
        if found is None:
            raise AssertionError(f"no Python {combo.python_min} here")
        if found == Path(sys.executable):
            return found
        pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
        group = sorted(pyproject["dependency-groups"]["dev"])
        digest = hashlib.sha256("\n".join([str(found), *group]).encode()).hexdigest()[:16]
        venv = root / f"venv-{combo.python_min}-{digest}"
        python = venv / "bin" / "python"
        with (root / f"{venv.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (venv / "ready").exists():
                uv = os.environ.get("UV") or shutil.which("uv") or str(BIN / "uv")
                for command in (
                    [uv, "venv", "--quiet", "--python", str(found), str(venv)],
                    [uv, "pip", "install", "--quiet", "--python", str(python), *group],
                ):
                    subprocess.run(command, check=True, capture_output=True, timeout=600)
                (venv / "ready").write_text("ready\n", encoding="utf-8")
        return python

    return _python
