"""A long-lived interpreter that runs pytest, mypy or Zensical in a fresh fork per request.

Starting Python and importing pytest, its plugins and hypothesis takes about 0.6 s,
mypy about 0.2 s, and Zensical with its Markdown extensions and mkdocstrings about
0.5 s: more than checking one rendered project costs once the checks are keyed.
This server imports them once, then forks a child per request:
the child starts a session of its own, points its standard streams at an output
file, moves to the project folder and runs the tool, exactly as ``python -m
pytest ARGS``, ``mypy ARGS`` or ``zensical ARGS`` would there, and ends the way such a process
ends (``SystemExit``, ``atexit`` handlers, finalisation).  Nothing of a project
is ever imported by the server itself, so each child starts from the same state.
``tests/test_harness.py`` checks that a preloaded run reports what a fresh
interpreter reports, failures included, and that a preloaded Zensical writes the
same site, byte for byte.

The children run with ``PYTHONDONTWRITEBYTECODE``, so that no ``__pycache__``
lands in a rendered project (whose files the matrix keys), and each one compiled
every module of the project, and pytest rewrote every test module, from source: a
third of a package test's run.  ``CodeMemo`` keeps what they compiled by content,
in a folder that every child shares (``python preloaded.py TOOLS MEMO``).

Protocol: once ready, a JSON line on standard output (``skipped``: the patches
``CodeMemo.install`` left out); then one JSON request per line on standard input
(``tool``, ``cwd``, ``args``, ``timeout``), one JSON answer per line on standard
output (``returncode``,
``output``: the path of the file holding the run's merged stdout and stderr,
``timed_out``).  This file runs on any interpreter that has pytest (the 3.12 and
3.13 environments of the matrix have no mypy): it imports nothing from ``tests``.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import json
import marshal
import os
import runpy
import select
import signal
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

GENERATED_PYTEST_PLUGINS = ("pytest_cov.plugin", "pytest_timeout", "_hypothesis_pytestplugin")
"""The pytest plugins of the generated projects' dev group, loaded by name."""
PLUGIN_DEPENDENCIES = ("hypothesis", "hypothesis.strategies", "coverage", "psutil")
DOCS_TEST_DEPENDENCIES = (
    "doctest",
    "sybil",
    "sybil.evaluators.doctest",
    "sybil.parsers.abstract",
    "sybil.parsers.markdown",
)
"""What ``tests/test_docs_examples.py`` of a project with docs imports, where installed."""
DOCS_MODULES = (
    "zensical.config",
    "zensical.markdown.render",
    "zensical.compat.mkdocstrings",
    "zensical.extensions.autorefs",
    "zensical.extensions.mkdocstrings",
    "zensical.extensions.macros",
    "mkdocstrings_handlers.python",
    "griffe",
    "pymdownx.highlight",
    "pymdownx.superfences",
    "pymdownx.snippets",
    "pymdownx.emoji",
    "markdown.extensions.toc",
    "markdown.extensions.tables",
    "markdown.extensions.admonition",
    "markdown.extensions.attr_list",
    "pygments.lexers.python",
    "pygments.lexers.shell",
    "pygments.formatters.html",
)
"""What a Zensical build of a generated project imports besides ``zensical.main``
(its Markdown extensions, mkdocstrings with griffe, the Pygments lexers): over a
third of a build.  A module a later Zensical no longer has is only not preloaded."""


def preload(tools: list[str]) -> None:
    """Import what the tools import on every run: pytest's own plugins, the named ones."""
    if "pytest" in tools:
        import _pytest.config
        import pytest  # noqa: F401

        # A private list: a pytest without it is only not preloaded, never wrong.
        for name in getattr(_pytest.config, "default_plugins", ()):
            with contextlib.suppress(ModuleNotFoundError):
                importlib.import_module(f"_pytest.{name}")
        # The plugins themselves are left to the child: pytest rewrites the asserts
        # of what PYTEST_PLUGINS names, and warns if it was imported before.  What
        # they import is preloaded.
        for name in PLUGIN_DEPENDENCIES:
            importlib.import_module(name)
        for name in DOCS_TEST_DEPENDENCIES:
            with contextlib.suppress(ModuleNotFoundError):
                importlib.import_module(name)
    if "mypy" in tools:
        import mypy.build
        import mypy.main  # noqa: F401
    if "zensical" in tools:
        import zensical.main  # noqa: F401

        for name in DOCS_MODULES:
            with contextlib.suppress(ModuleNotFoundError):
                importlib.import_module(name)


class CodeMemo:
    """Code objects by the content they were compiled from, shared by every child.

    Premise: ``compile`` makes the same code object from the same source on the
    same interpreter (``importlib.util.MAGIC_NUMBER``, the optimisation level, the
    loader's arguments), wherever the file lies, but for ``co_filename``, which is
    set again on load, in every nested code object, as importlib does for a
    ``.pyc`` whose source moved.  pytest's rewrite of a test module is a function
    of its source, pytest's version and the ``enable_assertion_pass_hook``
    setting; the path only names the file in its warnings.  A compile or rewrite
    that warns is not kept: it runs again, warnings and all, in every child.
    ``tests/test_harness.py`` compares every module of a render, compiled and
    rewritten through the memo at another path, with a plain compile there.

    Modules reach the memo through importlib's public path hooks: a
    ``FileFinder`` whose source loader is ``_MemoLoader``, ahead of the default
    one.  pytest has no public hook for its rewrite, so the memo replaces its
    private ``_rewrite_test``, only where that function is what the replacement
    was written for (``REWRITE_PARAMETERS``); elsewhere the rewrite is left
    alone, and ``install`` names the patch it skipped (a test of the harness
    fails on it, once).
    """

    REWRITE_PARAMETERS = ("fn", "config")
    """``_pytest.assertion.rewrite._rewrite_test``'s parameters, from pytest 9.0 on:
    it returns the source's ``os.stat_result`` and the rewritten code."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.interpreter = importlib.util.MAGIC_NUMBER + str(sys.flags.optimize).encode()

    def key(self, *parts: bytes | str) -> str:
        hasher = hashlib.sha256(self.interpreter)
        for part in parts:
            data = part.encode() if isinstance(part, str) else part
            hasher.update(len(data).to_bytes(8, "big") + data)
        return hasher.hexdigest()

    def load(self, key: str, path: str) -> types.CodeType | None:
        try:
            data = (self.folder / key).read_bytes()
        except FileNotFoundError:
            return None
        code: types.CodeType = marshal.loads(data)
        return _named(code, path)

    def store(self, key: str, code: types.CodeType) -> None:
        fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=".part-")
        with os.fdopen(fd, "wb") as file:
            file.write(marshal.dumps(code))
        os.replace(temporary, self.folder / key)

    def compiled(
        self, key: str, path: str, compile_: Callable[[], types.CodeType]
    ) -> types.CodeType:
        """The code of *key* from the memo, or *compile_*'s, kept unless it warned."""
        code = self.load(key, path)
        if code is not None:
            return code
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code = compile_()
        if caught:
            return compile_()  # warns as a plain compile does
        self.store(key, code)
        return code

    def install(self) -> list[str]:
        """Route module compiles and pytest's rewrites through the memo (inherited by forks).

        Returns the patches it skipped, each named with the reason: empty where
        every one fits.
        """
        memo = self

        class _MemoLoader(importlib.machinery.SourceFileLoader):
            def source_to_code(  # type: ignore[override]
                self, data: bytes, path: str, *args: Any, **kwargs: Any
            ) -> types.CodeType:
                arguments = repr((args, sorted(kwargs.items())))
                return memo.compiled(
                    memo.key("module", arguments, data),
                    path,
                    lambda: super(_MemoLoader, self).source_to_code(data, path, *args, **kwargs),
                )

        machinery = importlib.machinery
        sys.path_hooks.insert(
            0,
            machinery.FileFinder.path_hook(
                (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
                (_MemoLoader, machinery.SOURCE_SUFFIXES),
                (machinery.SourcelessFileLoader, machinery.BYTECODE_SUFFIXES),
            ),
        )
        sys.path_importer_cache.clear()  # finders made before use the default loader
        rewrite = sys.modules.get("_pytest.assertion.rewrite")
        if rewrite is None:
            return []
        version = sys.modules["pytest"].__version__
        plain_rewrite_test = getattr(rewrite, "_rewrite_test", None)
        parameters = () if plain_rewrite_test is None else _parameters(plain_rewrite_test)
        if plain_rewrite_test is None or parameters != self.REWRITE_PARAMETERS:
            return [
                f"CodeMemo's patch of pytest's private _rewrite_test: pytest {version} "
                f"has {'_rewrite_test' + str(parameters) if parameters else 'none'}, "
                f"the patch takes {self.REWRITE_PARAMETERS}; its rewrites are not kept"
            ]

        def _rewrite_test(fn: Path, config: Any) -> tuple[os.stat_result, types.CodeType]:
            source = fn.read_bytes()
            hook = repr(config.getini("enable_assertion_pass_hook"))
            key = memo.key("rewrite", version, hook, source)
            code = memo.compiled(key, str(fn), lambda: plain_rewrite_test(fn, config)[1])
            return fn.stat(), code

        rewrite._rewrite_test = _rewrite_test  # type: ignore[attr-defined]
        return []


def _named(code: types.CodeType, path: str) -> types.CodeType:
    """*code*, and every code object nested in it, with *path* as its file name."""
    if code.co_filename == path:
        return code
    constants = tuple(
        _named(constant, path) if isinstance(constant, types.CodeType) else constant
        for constant in code.co_consts
    )
    return code.replace(co_filename=path, co_consts=constants)


def _parameters(function: Callable[..., Any]) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return ()


def _run_tool(tool: str, args: list[str]) -> None:
    """Run *tool* in this (child) process as ``python -m TOOL ARGS`` does.

    ``runpy`` runs the tool's ``__main__`` module as ``-m`` would: as
    ``__main__``, with ``sys.argv[0]`` its file.  A process the run starts with
    multiprocessing's spawn or forkserver sees that ``__main__``, not this file.
    The tool ends the process (``SystemExit``, or mypy's ``os._exit`` after
    flushing its output, as its console script does).
    """
    if tool not in ("pytest", "mypy", "zensical"):
        raise SystemExit(f"unknown tool {tool!r}")
    sys.argv = [tool, *args]
    runpy.run_module(tool, run_name="__main__", alter_sys=True)
    raise SystemExit(0)


def _home_of_hypothesis() -> None:
    """Point hypothesis' storage folder where a fresh run would: the project's.

    Hypothesis takes ``Path.cwd() / ".hypothesis"`` as its default when it is
    imported, which happened in the server's folder.
    """
    configuration = sys.modules.get("hypothesis.configuration")
    if configuration is None:
        return
    default, resolved = "__hypothesis_home_directory_default", "__hypothesis_home_directory"
    for name in (default, resolved):
        if not hasattr(configuration, name):
            raise RuntimeError(f"hypothesis.configuration has no {name}: revisit preloaded.py")
    setattr(configuration, default, Path.cwd() / ".hypothesis")
    setattr(configuration, resolved, None)  # resolved again on first use, from the above


def _child(request: dict[str, Any], output: str) -> None:
    """The forked child: a session of its own, streams to *output*, then the tool."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out = os.open(output, os.O_WRONLY | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.chdir(request["cwd"])
    # ``python -m`` puts the working folder first on sys.path.
    sys.path[0] = os.getcwd()
    if request["tool"] == "pytest" and os.path.isdir("src"):
        # Installed (``uv sync``), a project's package is found by every
        # interpreter its suite starts, multiprocessing's fork server among them
        # (which takes no sys.path from its parent before it imports what it is
        # told to preload); here pytest's ``pythonpath`` setting finds it, in this
        # process only: the environment carries it to the others.
        os.environ["PYTHONPATH"] = os.path.join(os.getcwd(), "src")
    _home_of_hypothesis()
    _run_tool(request["tool"], list(request["args"]))


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    """Wait for *pid*, killing its session after *timeout* seconds; its exit status."""
    deadline = time.monotonic() + timeout
    pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    timed_out = False
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                break
            if pidfd is not None:
                select.select([pidfd], [], [], left)
            else:
                time.sleep(min(left, 0.002))
    finally:
        if pidfd is not None:
            os.close(pidfd)
    # Whatever the run started and left behind goes with its session, as
    # ``run_in`` does for a tool started as a process of its own.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return os.waitstatus_to_exitcode(status), timed_out


def serve(tools: list[str], memo: Path | None = None) -> None:
    preload(tools)
    skipped = []
    if memo is not None:
        memo.mkdir(parents=True, exist_ok=True)
        skipped = CodeMemo(memo).install()
    # The preloaded objects stay out of the children's collections: without this,
    # every full collection in a child walks them all (and copies the pages it
    # touches), which made a Zensical build 0.2 s slower with pytest and mypy loaded.
    gc.freeze()
    answers = sys.stdout
    answers.write(json.dumps({"skipped": skipped}) + "\n")  # ready, and what it left out
    answers.flush()
    for line in sys.stdin:
        request = json.loads(line)
        fd, output = tempfile.mkstemp(prefix="preloaded-", suffix=".out")
        os.close(fd)
        answers.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                _child(request, output)
            except SystemExit:
                raise
            except BaseException:
                import traceback

                traceback.print_exc()
                raise SystemExit(70) from None
        returncode, timed_out = _wait(pid, float(request["timeout"]))
        answer = {"returncode": returncode, "output": output, "timed_out": timed_out}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve(sys.argv[1].split(","), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
