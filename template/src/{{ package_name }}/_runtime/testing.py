"""Leak checks for tests: prove that code releases what it acquires.

Three tools, from the quickest to the most thorough:

``LeakCheck`` snapshots what the process holds before a block and fails if the
block left anything new behind: open file descriptors (told apart by what they
refer to, not by their numbers), threads (also those started outside
``threading``, on Linux), child processes (also the orphans of its children, on
Linux), inet connections, unreleased instances of the package's classes and
unfinished tasks of the running event loop.  It also fails on every object that
the garbage collector closed in the block (its ``ResourceWarning``).  What must
not count is allowed by kind or by predicate (``ignore=``), or acquired before
the snapshot (``warmup=``).

Example:
    ```python
    def test_report_is_closed() -> None:
        with LeakCheck():
            write_report("out.txt")
    ```

``hunt_leaks`` runs a scenario many times, in the style of CPython's refleak
hunter (``python -m test -R``): warm-up runs fill caches, then every tracked run
must leave the same descriptors, threads, children, connections, resources and
tasks, and memory must not grow on every one of them.  A failure names what
leaked: the file's path or the socket's addresses, the thread's name (or the
function it runs), the child's pid and command line, the resource's ``repr``,
the task's coroutine, where a collected object's warning was emitted, or where
the leaked memory was allocated.

Example:
    ```python
    report = hunt_leaks(lambda: fetch_all(urls))
    ```

``run_with_fd_limit`` runs a scenario a thousand times in a child process whose
file-descriptor limit is lowered, so that a leak ends in ``EMFILE`` instead of
passing unnoticed.

To leak-check a pytest test in one line, use the ``leak_check`` marker or fixture
of the ``pytest_plugin`` module.

What a check cannot see: a descriptor that reopens the same file with the same
access mode (or makes a new ``epoll`` or ``eventfd``, which share one inode) at
the number of one the block closed; outside Linux, threads outside ``threading``
and orphans; tasks of event loops in other threads; an object whose class does
not warn when collected unreleased.  The leak-testing page of the documentation
has the whole table.

``check_resource`` and ``check_async_resource`` attack a context-manager class
at every point where an interrupt or a failed system call could land.

This module names the tools; each lives in a module of its own concern:
``_process`` and ``snapshot`` (what the process holds), ``leak_check`` (``LeakCheck``,
``hunt_leaks``), ``fd_limit`` (``run_with_fd_limit``), ``conformance`` and
``async_conformance`` (the contract checkers, with ``_faults``, the fault
injection they share).  The pytest plugin is ``pytest_plugin``.

Needs ``psutil`` (the ``testing`` extra).  POSIX only; socket descriptions are
the most detailed on Linux.
"""

from __future__ import annotations

from .async_conformance import check_async_resource
from .conformance import ContractError, ContractReport, check_resource
from .fd_limit import run_with_fd_limit
from .leak_check import LeakCheck, LeakError, LeakReport, hunt_leaks
from .snapshot import ResourceSnapshot

__all__ = [
    "ContractError",
    "ContractReport",
    "LeakCheck",
    "LeakError",
    "LeakReport",
    "ResourceSnapshot",
    "check_async_resource",
    "check_resource",
    "hunt_leaks",
    "run_with_fd_limit",
]
