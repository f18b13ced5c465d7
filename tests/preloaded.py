"""A long-lived interpreter that runs pytest and mypy in a fresh fork per request.

Starting Python and importing pytest, its plugins and hypothesis takes about 0.6 s,
and mypy about 0.2 s: more than checking one rendered project costs once the
checks are keyed.  This server imports them once, then forks a child per request:
the child starts a session of its own, points its standard streams at an output
file, moves to the project folder and runs the tool, exactly as ``python -m
pytest ARGS`` or ``mypy ARGS`` would there, and ends the way such a process
ends (``SystemExit``, ``atexit`` handlers, finalisation).  Nothing of a project
is ever imported by the server itself, so each child starts from the same state.
``tests/test_harness.py`` checks that a preloaded run reports what a fresh
interpreter reports, failures included.

Protocol: one JSON request per line on standard input (``tool``, ``cwd``, ``args``,
``timeout``), one JSON answer per line on standard output (``returncode``,
``output``: the path of the file holding the run's merged stdout and stderr,
``timed_out``).  This file runs on any interpreter that has pytest (the 3.12 and
3.13 environments of the matrix have no mypy): it imports nothing from ``tests``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import sys
import tempfile
import time
from typing import Any

GENERATED_PYTEST_PLUGINS = ("pytest_cov.plugin", "pytest_timeout", "_hypothesis_pytestplugin")
"""The pytest plugins of the generated projects' dev group, loaded by name."""
PLUGIN_DEPENDENCIES = ("hypothesis", "hypothesis.strategies", "coverage", "psutil")


def preload(tools: list[str]) -> None:
    """Import what the tools import on every run: pytest's own plugins, the named ones."""
    if "pytest" in tools:
        import _pytest.config
        import pytest  # noqa: F401

        for name in _pytest.config.default_plugins:
            importlib.import_module(f"_pytest.{name}")
        # The plugins themselves are left to the child: pytest rewrites the asserts
        # of what PYTEST_PLUGINS names, and warns if it was imported before.  What
        # they import is preloaded.
        for name in PLUGIN_DEPENDENCIES:
            importlib.import_module(name)
    if "mypy" in tools:
        import mypy.build
        import mypy.main  # noqa: F401


def _run_tool(tool: str, args: list[str]) -> None:
    """Run *tool* in this (child) process; it ends by raising ``SystemExit``."""
    if tool == "pytest":
        import pytest

        sys.argv = [pytest.__file__, *args]
        raise SystemExit(pytest.console_main())
    if tool == "mypy":
        import mypy.main

        sys.argv = ["mypy", *args]
        mypy.main.main(args=args, clean_exit=True)
        raise SystemExit(0)
    raise SystemExit(f"unknown tool {tool!r}")


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
    # ``python -m pytest`` puts the working folder first on sys.path.
    sys.path[0] = os.getcwd()
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


def serve(tools: list[str]) -> None:
    preload(tools)
    answers = sys.stdout
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
    serve(sys.argv[1].split(","))
