"""The runtime, checked where it is written: plain Python, linted, strictly typed, tested.

``template/src/{{ package_name }}/_runtime/`` is copied into every project as it is
(``test_runtime_is_shipped_verbatim`` in ``tests/test_matrix.py`` compares every
render with it), so these checks run once here, on every supported Python, with
the settings of the generated ``pyproject.toml``: no render is needed.  Its own
suite, ``tests/runtime/``, runs in this session on this Python, and here on each
other supported Python installed (``test_runtime_suite_passes_on``); CI installs
them all.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import jinja2
import pytest

from tests.conftest import (
    BIN,
    RUNTIME_SUITE,
    _shared_root,
    environment_of,
    runtime_suite_env,
    runtime_suite_requirements,
    tool_env,
)
from tests.matrix import (
    PYTHON_VERSIONS,
    ROOT,
    RUNTIME_PYTHON,
    TEMPLATE_RUNTIME,
    find_python,
    registry,
)

if TYPE_CHECKING:
    from pathlib import Path

GENERATED_PYPROJECT = ROOT / "template" / "pyproject.toml.jinja"
THIRD_PARTY = frozenset({"hypothesis", "psutil", "pytest"})
"""What the runtime may import besides the standard library and itself: the test
tools' dependencies (the generated project's ``testing`` extra and dev group;
``hypothesis`` for the stress tier's ``stress`` only)."""


def _tool_settings(tool: str, **context: str) -> str:
    """The ``[tool.<tool>...]`` tables of the generated ``pyproject.toml``, rendered."""
    text = GENERATED_PYPROJECT.read_text(encoding="utf-8")
    table = rf"^\[tool\.{tool}[.\]].*?(?=^\[(?!tool\.{tool}[.\]])|\Z)"
    tables = re.findall(table, text, re.DOTALL | re.MULTILINE)
    assert tables, f"no [tool.{tool}] in {GENERATED_PYPROJECT.name}"
    rendered = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string("".join(tables))
    return rendered.render(**context)


def test_runtime_holds_exactly_the_registry_modules() -> None:
    # Tools' caches (.ruff_cache, __pycache__) are copier.yml's _exclude: no render has them.
    names = sorted(
        path.name
        for path in TEMPLATE_RUNTIME.iterdir()
        if not path.name.startswith(".") and path.name != "__pycache__"
    )
    assert names == sorted(f"{module}.py" for module in registry.RUNTIME_MODULES)


@pytest.mark.parametrize("module", registry.RUNTIME_MODULES)
def test_runtime_module_is_plain_python_importing_only_itself(module: str) -> None:
    """No Jinja, and no import of the package around it: only relative imports,
    the standard library and the test tools' dependencies."""
    source = (TEMPLATE_RUNTIME / f"{module}.py").read_text(encoding="utf-8")
    assert not re.search(r"\{\{|\{%|\{#", source), "Jinja syntax in the runtime"
    outside = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            top = name.partition(".")[0]
            if top not in sys.stdlib_module_names and top not in THIRD_PARTY:
                outside.append(name)
    assert outside == []


@pytest.mark.parametrize("target", ["py311", "py312", "py313", "py314"])
def test_runtime_passes_ruff(tmp_path: Path, target: str) -> None:
    """``ruff check`` and ``ruff format --check`` with the generated settings.

    With every floor's target (some rules apply from a version on), and the
    runtime's suite too: it is checked as a project's tests are.
    """
    config = tmp_path / "pyproject.toml"
    config.write_text(_tool_settings("ruff", ruff_target=target), encoding="utf-8")
    failures = []
    folders = [str(TEMPLATE_RUNTIME.relative_to(ROOT)), str(RUNTIME_SUITE.relative_to(ROOT))]
    for command in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [str(BIN / "ruff"), *command, "--no-cache", "--config", str(config), *folders],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            env=tool_env(),
        )
        if result.returncode:
            failures.append(result.stdout + result.stderr)
    assert failures == []


@pytest.mark.parametrize("python_version", PYTHON_VERSIONS)
def test_runtime_passes_mypy_strict(python_version: str, tmp_path: Path) -> None:
    """``mypy --strict`` with the generated settings, for each supported Python.

    The runtime's suite too, which imports the runtime as ``_runtime``.
    """
    config = tmp_path / "pyproject.toml"
    config.write_text(_tool_settings("mypy", python_min=python_version), encoding="utf-8")
    result = subprocess.run(
        [
            str(BIN / "mypy"),
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            str(TEMPLATE_RUNTIME.relative_to(ROOT)),
            str(RUNTIME_SUITE.relative_to(ROOT)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**tool_env(), "MYPYPATH": str(TEMPLATE_RUNTIME.parent)},
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "python_version", [version for version in PYTHON_VERSIONS if version != RUNTIME_PYTHON]
)
def test_runtime_suite_passes_on(
    python_version: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``tests/runtime`` on another supported Python, in an environment of its own.

    This session runs the suite on its own Python.  The suite's own ``pytest.ini``
    holds a generated project's pytest settings; its ``conftest.py`` imports
    nothing of the template's harness, so pytest, pytest-timeout, psutil and
    hypothesis are all it needs.
    """
    found = find_python(python_version)
    if found is None:
        pytest.skip(f"Python {python_version} is not installed here")
    root = _shared_root(tmp_path_factory)
    python = environment_of(found, runtime_suite_requirements(), root)
    result = subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", str(RUNTIME_SUITE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=runtime_suite_env(),
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
