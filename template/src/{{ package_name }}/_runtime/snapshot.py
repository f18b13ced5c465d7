"""What the process holds: one snapshot, and what changed between two.

``ResourceSnapshot.take()`` records everything ``LeakCheck`` and ``hunt_leaks``
compare; ``ResourceSnapshot._fingerprint()``, the part that ``check_resource``
compares after each fault it injects, is quick.  Both compare the same way.
"""

from __future__ import annotations

import gc
import os
import tracemalloc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import psutil

from ._resource import live_resources

if TYPE_CHECKING:
    pass


from ._process import (
    _NO_PYTHON,
    _child_pids,
    _children,
    _describe_child,
    _fd_table,
    _loop_executor_threads,
    _multiprocessing_helpers,
    _native_threads,
    _open_fds,
    _python_outside_threading,
    _reap_if_adopted,
    _running_threads,
    _safe_repr,
    _sockets,
    _tasks,
)

_TOOLKIT_FILES = frozenset(
    os.path.join(os.path.dirname(__file__), f"{name}.py")
    for name in (
        "_process",
        "snapshot",
        "leak_check",
        "fd_limit",
        "_faults",
        "conformance",
        "async_conformance",
        "testing",
    )
)
"""The toolkit's own modules: their frames are not the code under test, and what
they allocate or warn about while they look is their own doing."""


@dataclass(frozen=True, slots=True)
class ResourceSnapshot:
    """What the current process holds at one moment, each item with a description.

    ``fds`` maps each open descriptor to its path, its socket addresses or its
    kind (``pipe:[...]``), and ``fd_identities`` to what it refers to (device,
    inode, file type and access mode, as ``"2049:1337:100000:1"``), which tells
    it from a descriptor that had its number before; ``threads`` maps the idents
    of ``threading``'s threads to names (not the workers of the running event
    loop's default executor, which live as long as the loop), and
    ``thread_native_ids`` to their OS ids, which tell a new thread from an ended
    one whose ident it reuses; ``native_threads`` maps the ids of the
    process's other OS threads (started by ``_thread.start_new_thread`` or by C
    code; Linux only) to their names and what they run; ``children`` maps the
    pids of descendants to command lines (multiprocessing's resource tracker and
    fork server, which live as long as the interpreter, and their descriptors
    are left out); ``connections`` maps inet connections to their status;
    ``resources`` maps the ``id`` of each unreleased instance of a class marked
    with ``helpers.tracked_resource`` to its ``repr``;
    ``tasks`` maps the ``id`` of each unfinished task of the event loop running
    in this thread, if one runs, to its name and coroutine; ``traced_memory`` is
    the memory traced by ``tracemalloc`` in bytes, or None when ``tracemalloc``
    is not tracing.
    """

    fds: dict[int, str]
    threads: dict[int, str]
    children: dict[int, str]
    connections: dict[str, str]
    resources: dict[int, str] = field(default_factory=dict)
    traced_memory: int | None = None
    fd_identities: dict[int, str] = field(default_factory=dict)
    native_threads: dict[int, str] = field(default_factory=dict)
    tasks: dict[int, str] = field(default_factory=dict)
    thread_native_ids: dict[int, int | None] = field(default_factory=dict)

    @classmethod
    def take(cls) -> ResourceSnapshot:
        """Collect garbage, then record what the process holds.

        An adopted orphan that has ended (see ``LeakCheck``) is reaped first.
        """
        gc.collect()
        process = psutil.Process()
        open_fds, identities = _fd_table()
        socket_fds, connections = _sockets(open_fds)
        helper_pids, helper_fds = _multiprocessing_helpers()
        fds = {
            fd: socket_fds.get(fd, description)
            for fd, description in open_fds.items()
            if fd not in helper_fds
        }
        children = {
            pid: command
            for pid, command in _children(process).items()
            if pid not in helper_pids
        }
        running = _running_threads()
        executor = _loop_executor_threads()
        threads = {
            thread.ident: thread.name
            for thread in running
            if thread.ident is not None and thread.ident not in executor
        }
        thread_native_ids = {
            thread.ident: thread.native_id
            for thread in running
            if thread.ident is not None
        }
        native_threads = _native_threads(
            {thread.native_id for thread in running if thread.native_id is not None},
            sorted(_python_outside_threading(running).values()),
        )
        resources = {id(obj): _safe_repr(obj) for obj in live_resources()}
        traced = (
            tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None
        )
        return cls(
            fds,
            threads,
            children,
            connections,
            resources,
            traced,
            identities,
            native_threads,
            _tasks(),
            thread_native_ids,
        )

    @classmethod
    def _fingerprint(cls, *, describe: bool = False) -> ResourceSnapshot:
        """Record, quickly, the descriptors, threads and children the process holds.

        What ``check_resource`` compares after each of the thousands of faults it
        injects: no garbage is collected (the caller decides when), and only what
        a resource's release frees is read.  A descriptor's description stands for
        its identity; a thread outside ``threading`` is one that runs Python code,
        keyed by its ident; a child is named by its command line only if
        *describe* (which takes longer), and an adopted orphan that has ended is
        reaped first.  Connections, tracked resources, tasks and memory are left
        empty.
        """
        fds = _open_fds()
        running = _running_threads()
        executor = _loop_executor_threads()
        children = {
            pid: _describe_child(pid) if describe else ""
            for pid in _child_pids(psutil.Process())
            if not _reap_if_adopted(pid)
        }
        return cls(
            fds,
            {
                thread.ident: thread.name
                for thread in running
                if thread.ident is not None and thread.ident not in executor
            },
            children,
            {},
            fd_identities=fds,
            native_threads={
                ident: f"running {function}"
                for ident, function in _python_outside_threading(running).items()
            },
            thread_native_ids={
                thread.ident: thread.native_id
                for thread in running
                if thread.ident is not None
            },
        )

    def leaks_since(self, before: ResourceSnapshot) -> list[str]:
        """Describe everything held now that was not held in ``before``.

        Memory is not compared: one run proves nothing about it (see
        ``hunt_leaks``).
        """
        return sorted(leak.text for leak in _leaks_between(before, self))


class _Leak(NamedTuple):
    """One thing held that was not held before: its kind and its description."""

    kind: str
    text: str
    lingers: bool = False
    """Whether it may be an OS thread whose Python side has ended (see _THREAD_EXIT)."""


def _leaks_between(before: ResourceSnapshot, after: ResourceSnapshot) -> list[_Leak]:
    leaks = [
        _Leak("fd", f"file descriptor {fd} ({description})")
        for fd, description in after.fds.items()
        if fd not in before.fds
        or after.fd_identities.get(fd) != before.fd_identities.get(fd)
    ]
    leaks += [
        _Leak("thread", f"thread {name!r} (ident {ident})")
        for ident, name in after.threads.items()
        if before.threads.get(ident) != name
        # A new thread may reuse the ident of one that ended: the OS id tells.
        or before.thread_native_ids.get(ident) != after.thread_native_ids.get(ident)
    ]
    leaks += [
        _Leak("thread", f"thread {tid} outside threading ({what})", _NO_PYTHON in what)
        for tid, what in after.native_threads.items()
        if tid not in before.native_threads
    ]
    leaks += [
        _Leak(
            "process",
            f"child process {pid}: {command}" if command else f"child process {pid}",
        )
        for pid, command in after.children.items()
        if pid not in before.children
    ]
    leaks += [
        _Leak("connection", f"inet connection {conn} [{status}]")
        for conn, status in after.connections.items()
        if conn not in before.connections
    ]
    leaks += [
        _Leak("resource", f"unreleased {description}")
        for key, description in after.resources.items()
        if key not in before.resources
    ]
    leaks += [
        _Leak("task", f"asyncio task {description}")
        for key, description in after.tasks.items()
        if before.tasks.get(key) != description
    ]
    return leaks
