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

Needs ``psutil`` (the ``testing`` extra).  POSIX only; socket descriptions are
the most detailed on Linux.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dis
import errno
import fcntl
import functools
import gc
import io
import multiprocessing
import multiprocessing.connection
import os
import pickle
import resource
import signal
import socket
import sys
import sysconfig
import threading
import time
import traceback
import tracemalloc
import warnings
from dataclasses import dataclass, field
from stat import S_IFMT
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import psutil

from ._resource import (
    deferred_interrupts,
    live_resources,
    record_call,
)
from .errors import ClosedResourceError, ReentryError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Iterator
    from contextlib import AbstractAsyncContextManager, AbstractContextManager
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess
    from types import FrameType, TracebackType

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

_FD_DIRS = ("/proc/self/fd", "/dev/fd")
_SOCKET_KINDS: dict[tuple[int, int], str] = {
    (socket.AF_INET, socket.SOCK_STREAM): "tcp",
    (socket.AF_INET6, socket.SOCK_STREAM): "tcp6",
    (socket.AF_INET, socket.SOCK_DGRAM): "udp",
    (socket.AF_INET6, socket.SOCK_DGRAM): "udp6",
}


class LeakError(AssertionError):
    """Raised when checked code leaves resources behind; the message lists them."""


def _describe_fd(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "?"


def _open_fds() -> dict[int, str]:
    for fd_dir in _FD_DIRS:
        try:
            names = os.listdir(fd_dir)
        except FileNotFoundError:
            continue
        fds = {int(name) for name in names}
        # The listing opened one descriptor of its own, now closed again.
        return {fd: _describe_fd(fd) for fd in sorted(fds) if _fd_is_open(fd)}
    msg = "cannot list open file descriptors on this platform"
    raise OSError(msg)


def _fd_is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _fd_table() -> tuple[dict[int, str], dict[int, str]]:
    """Describe each open descriptor, and say what it refers to.

    A number does not tell one descriptor from another: close one, open another,
    and the new one gets the lowest free number, often the same.  What it refers
    to does: a file's device and inode (each socket and each pipe has an inode of
    its own), its type, and the access mode it was opened with: an identity
    such as ``"2049:1337:100000:1"``.  (A string: unlike small tuples, it leaves
    no garbage in the interpreter's free lists for ``hunt_leaks`` to count.)
    """
    for fd_dir in _FD_DIRS:
        try:
            names = os.listdir(fd_dir)
        except FileNotFoundError:
            continue
        descriptions: dict[int, str] = {}
        identities: dict[int, str] = {}
        for fd in sorted(int(name) for name in names):
            try:
                status = os.fstat(fd)
                mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
            except OSError:  # the listing's own descriptor, closed again
                continue
            kind = S_IFMT(status.st_mode)
            identities[fd] = f"{status.st_dev}:{status.st_ino}:{kind:o}:{mode}"
            descriptions[fd] = _describe_fd(fd)
        return descriptions, identities
    msg = "cannot list open file descriptors on this platform"
    raise OSError(msg)


def _address(address: object) -> str:
    if isinstance(address, str):  # a Unix socket's path ("" when unnamed)
        return address or "unnamed"
    if not isinstance(address, tuple) or not address:  # no remote end
        return "-"
    host, port = address[:2]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


_Connection = tuple[int, int, int, Any, Any, str]
"""A socket as ``psutil`` lists it: fd, family, type, local, remote address, status."""
_TCP_STATES = {
    1: psutil.CONN_ESTABLISHED,
    2: psutil.CONN_SYN_SENT,
    3: psutil.CONN_SYN_RECV,
    4: psutil.CONN_FIN_WAIT1,
    5: psutil.CONN_FIN_WAIT2,
    6: psutil.CONN_TIME_WAIT,
    7: psutil.CONN_CLOSE,
    8: psutil.CONN_CLOSE_WAIT,
    9: psutil.CONN_LAST_ACK,
    10: psutil.CONN_LISTEN,
    11: psutil.CONN_CLOSING,
}
"""Linux's TCP states (``tcpi_state``), by number."""


class _AskTheTables(Exception):  # noqa: N818 - a signal between two functions
    """A socket that only the system's connection tables describe fully."""


def _sockets(fds: dict[int, str]) -> tuple[dict[int, str], dict[str, str]]:
    """Describe the process's sockets: by descriptor, and its inet connections."""
    by_fd: dict[int, str] = {}
    connections: dict[str, str] = {}
    for fd, family, kind_type, laddr, raddr, status in _connections(fds):
        kind = _SOCKET_KINDS.get((family, kind_type), "unix")
        name = f"{kind} {_address(laddr)} -> {_address(raddr)}"
        shown = f" [{status}]" if status != psutil.CONN_NONE else ""
        if fd >= 0:
            by_fd[fd] = f"socket {name}{shown}"
        if kind != "unix":
            connections[name] = status
    return by_fd, connections


def _connections(fds: dict[int, str]) -> list[_Connection]:
    """The process's sockets, as ``psutil``'s ``net_connections("all")`` lists them.

    On Linux each socket among *fds* is asked directly for its addresses and its
    TCP state, at the same cost however many connections the machine has.
    ``psutil`` reads the machine's whole connection tables instead: tens of
    milliseconds once thousands of closed connections wait out their TIME_WAIT.
    It still serves on other systems, when a default socket timeout is set (a
    socket object made on a descriptor would make it non-blocking), and when a
    socket cannot tell all (a connection being made does not know its peer).
    """
    if sys.platform == "linux" and socket.getdefaulttimeout() is None:
        try:
            return _asked_connections(fds)
        except _AskTheTables:
            pass
    return _listed_connections()


def _asked_connections(fds: dict[int, str]) -> list[_Connection]:
    """The sockets among *fds* as the tables list them, asked directly (Linux)."""
    return [
        found
        for fd, what in fds.items()
        if what.startswith("socket:")
        for found in _ask_socket(fd)
    ]


def _listed_connections() -> list[_Connection]:
    """The process's sockets, as ``psutil`` reads them from the connection tables."""
    try:
        found = psutil.Process().net_connections(kind="all")
    except psutil.Error:
        return []
    return [(c.fd, c.family, c.type, c.laddr, c.raddr, c.status) for c in found]


def _ask_socket(fd: int) -> list[_Connection]:
    """Socket *fd* as the tables list it (none if they do not), asked directly."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:  # closed meanwhile
        return []
    try:
        return _describe_socket(fd, sock)
    except OSError as error:
        if error.errno == errno.EBADF:  # closed meanwhile
            return []
        raise _AskTheTables from error
    finally:
        sock.detach()  # the descriptor stays open: it is not ours


def _describe_socket(fd: int, sock: socket.socket) -> list[_Connection]:
    family, kind_type = sock.family, sock.type
    if family == socket.AF_UNIX:  # the tables know its own path, never its peer's
        path = sock.getsockname()
        if isinstance(path, bytes):  # an abstract address, shown as Linux shows it
            path = "@" + os.fsdecode(path[1:].replace(b"\0", b"@"))
        return [(fd, family, kind_type, path, "", psutil.CONN_NONE)]
    if (family, kind_type) not in _SOCKET_KINDS:
        return []  # neither TCP nor UDP: in none of the tables
    if sock.proto not in (0, socket.IPPROTO_TCP, socket.IPPROTO_UDP):
        raise _AskTheTables
    local = sock.getsockname()[:2]
    status = psutil.CONN_NONE
    if kind_type == socket.SOCK_STREAM:
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
        if state == _TCP_CLOSE:
            return []  # neither listening nor connected: in no table
        if state not in _TCP_STATES:
            raise _AskTheTables
        status = _TCP_STATES[state]
    elif local[1] == 0:
        return []  # a UDP socket never bound: in no table
    try:
        remote = sock.getpeername()[:2]
    except OSError as error:
        if error.errno != errno.ENOTCONN or status not in _PEERLESS:
            raise
        remote = ()
    return [(fd, family, kind_type, local, remote, status)]


_TCP_CLOSE = 7
_PEERLESS = (psutil.CONN_LISTEN, psutil.CONN_NONE)
"""Statuses in which a socket has no peer: listening TCP, unconnected UDP."""


def _child_pids(process: psutil.Process) -> list[int]:
    """Return the pids of every descendant, reading ``/proc`` directly if it can.

    ``psutil``'s ``children()`` scans every process of the system; Linux lists a
    process's children in ``/proc/<pid>/task/<tid>/children``.
    """
    if not os.path.exists(f"/proc/{process.pid}/task/{process.pid}/children"):
        return [child.pid for child in process.children(recursive=True)]
    pids: list[int] = []
    pending = [process.pid]
    while pending:
        parent = pending.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:  # the process ended meanwhile
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children", "rb") as listing:
                    found = [int(pid) for pid in listing.read().split()]
            except OSError:  # the thread ended meanwhile
                continue
            pids += found
            pending += found
    return pids


def _children(process: psutil.Process) -> dict[int, str]:
    children: dict[int, str] = {}
    for pid in _child_pids(process):
        try:
            child = psutil.Process(pid)
            if child.status() == psutil.STATUS_ZOMBIE and _reap_if_adopted(pid):
                continue
            children[pid] = f"{_command_of(child)} [{child.status()}]"
        except psutil.Error:
            continue
    return children


_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


class _OrphanAdoption:
    """Make this process adopt its descendants' orphans while entered (Linux).

    A child that starts a process and exits leaves that process to init, where
    no walk of this process's descendants finds it.  Linux's child subreaper
    (``prctl(PR_SET_CHILD_SUBREAPER)``, since Linux 3.4) has the kernel give
    such orphans to this process instead, whatever they did: changed their
    session or process group, or dropped their environment.  The other ways
    were weighed and rejected: the processes of this session or process group
    include others' (pytest-xdist's workers share theirs; a terminal's jobs
    share a session), and not a child that started a session of its own; a
    marker in the environment is lost to a child given an environment of its
    own, and finding it means reading every process of the system.

    Limits: Linux only; only the orphans made while entered are adopted; an
    adopted orphan stays a child of this process for good, and once it ends
    only this process can reap it (``ResourceSnapshot.take`` reaps those it can
    tell from a child of this process's own).  A process that already adopts
    orphans is left as it is.
    """

    __slots__ = ("_adopting",)

    def __init__(self) -> None:
        self._adopting = False

    def __enter__(self) -> None:
        if sys.platform != "linux":
            return
        libc, current = _libc(), ctypes.c_int()
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(current), 0, 0, 0) != 0:
            return
        if not current.value:
            self._adopting = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0

    def __exit__(self, *exc_info: object) -> None:
        if self._adopting:
            self._adopting = False
            _libc().prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _reap_if_adopted(pid: int) -> bool:
    """Reap child *pid* if it is an adopted orphan that has ended; return whether.

    A child that this process forked was born in its session, and can leave it
    only for a session of its own (``setsid``): a zombie child in any other
    session was adopted (see ``_OrphanAdoption``), and no ``Popen`` of this
    process will ever wait for it.  A zombie in this session may be a child
    whose owner has yet to collect its status: it is left alone, and reported.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            fields = stat_file.read().rpartition(b")")[2].split()
    except OSError:  # not Linux, or reaped meanwhile
        return False
    state, parent, session = fields[0], int(fields[1]), int(fields[3])
    if state != b"Z" or parent != os.getpid() or session in {pid, os.getsid(0)}:
        return False
    with contextlib.suppress(ChildProcessError):  # reaped meanwhile
        os.waitpid(pid, os.WNOHANG)
    return True


def _command_of(child: psutil.Process) -> str:
    """The child's command line, or its name if it has none (a zombie's).

    A child whose ``exec`` is under way shows an empty command line for a moment,
    after ``Popen`` has already returned (the close-on-exec pipe it waits for
    closes before the new program's arguments are in place): that is waited out.
    ``psutil`` refuses a zombie's command line: a zombie is named, not skipped.
    """
    for _ in range(20):
        try:
            command = " ".join(child.cmdline())
        except psutil.ZombieProcess:
            return child.name()
        if command or child.status() == psutil.STATUS_ZOMBIE:
            return command or child.name()
        time.sleep(0.005)
    return child.name()


def _multiprocessing_helpers() -> tuple[set[int], set[int]]:
    """Return the pids and descriptors of multiprocessing's process-wide helpers.

    The resource tracker, started with the first child spawned, and the fork
    server live until the interpreter exits, like a cache: they are not leaks.
    Their handles are private attributes, so they are read defensively, and only
    from modules already imported.
    """
    pids: set[int] = set()
    fds: set[int] = set()
    for module_name, helper_name, pid_name, fd_name in (
        ("resource_tracker", "_resource_tracker", "_pid", "_fd"),
        ("forkserver", "_forkserver", "_forkserver_pid", "_forkserver_alive_fd"),
    ):
        module = sys.modules.get(f"multiprocessing.{module_name}")
        helper = getattr(module, helper_name, None)
        pid, fd = getattr(helper, pid_name, None), getattr(helper, fd_name, None)
        if isinstance(pid, int):
            pids.add(pid)
        if isinstance(fd, int):
            fds.add(fd)
    return pids, fds


def _safe_repr(obj: object) -> str:
    try:
        return repr(obj)
    except Exception as error:  # noqa: BLE001 - a broken repr must not hide the leak
        return f"<{type(obj).__qualname__} object, repr failed: {error!r}>"


_THREAD_EXIT = 1.0
"""Seconds an OS thread is given to end after its Python side is done.

``Thread.join()`` returns as soon as the thread's Python state is gone, a moment
before the OS thread itself ends: in a loop of a thousand starts and joins, half
of the joined threads were still listed by the kernel, for up to 9 ms.
"""


def _native_threads(known: set[int], running: list[str]) -> dict[int, str]:
    """Describe the OS threads that no ``threading.Thread`` stands for (Linux).

    ``_thread.start_new_thread`` and C libraries start threads that ``threading``
    never hears of; Linux lists every thread of the process in
    ``/proc/self/task``.  *known* holds the OS ids of ``threading``'s threads,
    *running* what each thread that runs Python code outside ``threading`` runs.
    Python cannot tell which OS thread runs which of those: a thread is named
    after its function only when it is the only one.
    """
    try:
        listed = os.listdir("/proc/self/task")
    except FileNotFoundError:
        return {}
    foreign = [tid for tid in map(int, listed) if tid not in known]
    if len(foreign) == 1 and len(running) == 1:
        what = f"running {running[0]}"
    elif running:
        some = "one of" if len(running) >= len(foreign) else f"{_NO_PYTHON} or one of"
        what = f"running {some}: {', '.join(running)}"
    else:
        what = f"running {_NO_PYTHON}"
    return {tid: f"{_thread_name(tid)!r}, {what}" for tid in foreign}


_NO_PYTHON = "no Python code"
"""Said of an OS thread that may run no Python code: maybe one whose Python is done."""


def _running_threads() -> list[threading.Thread]:
    """``threading.enumerate()``, but for the stand-ins of threads that have ended.

    A thread that ``threading`` did not start gets a ``_DummyThread`` when it
    asks for ``current_thread()``, and Python 3.11 lists it for ever, after the
    OS thread is gone (Linux tells).
    """
    return [
        thread
        for thread in threading.enumerate()
        if not isinstance(thread, threading._DummyThread)
        or not os.path.isdir("/proc/self/task")
        or os.path.isdir(f"/proc/self/task/{thread.native_id}")
    ]


_LOOP_EXECUTOR_KNOWN = sys.version_info < (3, 15)
"""Whether ``_loop_executor_threads`` reads asyncio's private attributes: a loop
keeps its default executor in ``_default_executor``, a ``ThreadPoolExecutor``
whose workers are in ``_threads``, on every Python from 3.11 to 3.14
(``tests/test_runtime_internals.py`` of the template checks each)."""


def _loop_executor_threads() -> set[int | None]:
    """The idents of the workers of this thread's running loop's default executor.

    They live as long as the loop, like a cache.  asyncio keeps the executor in a
    private attribute, read defensively where it was checked; on a later Python
    the threads named as asyncio names those workers (``asyncio_0``, ...) stand
    in for them.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return set()
    if not _LOOP_EXECUTOR_KNOWN:
        named = (t for t in threading.enumerate() if t.name.startswith("asyncio_"))
        return {thread.ident for thread in named}
    executor = getattr(loop, "_default_executor", None)
    return {thread.ident for thread in getattr(executor, "_threads", ())}


def _python_outside_threading(threads: list[threading.Thread]) -> dict[int, str]:
    """Map each thread that runs Python outside *threads* to where it started."""
    known = {thread.ident for thread in threads}
    frames = sys._current_frames()
    try:
        return {
            ident: _started_in(frame)
            for ident, frame in frames.items()
            if ident not in known
        }
    finally:
        frames.clear()  # this function's own frame is among them: no cycle stays


def _started_in(frame: FrameType) -> str:
    """The function at the bottom of *frame*'s stack, and where it is."""
    while frame.f_back is not None:
        frame = frame.f_back
    code = frame.f_code
    return f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"


def _thread_name(tid: int) -> str:
    """The kernel's name of thread *tid* (by default, the program's)."""
    try:
        comm = f"/proc/self/task/{tid}/comm"
        with open(comm, encoding="utf-8", errors="replace") as name:
            return name.read().rstrip("\n")
    except OSError:  # ended meanwhile
        return "?"


def _loop_tasks() -> set[asyncio.Task[Any]]:
    """The unfinished tasks of the event loop running in this thread, if one runs."""
    try:
        return asyncio.all_tasks(asyncio.get_running_loop())
    except RuntimeError:
        return set()


def _tasks() -> dict[int, str]:
    """Describe the unfinished tasks of the event loop running in this thread."""
    return {id(task): _task_description(task) for task in _loop_tasks()}


def _task_description(task: asyncio.Task[Any]) -> str:
    coroutine: Any = task.get_coro()
    code = getattr(coroutine, "cr_code", getattr(coroutine, "gi_code", None))
    runs = (
        f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"
        if code is not None
        else _safe_repr(coroutine)
    )
    return f"{task.get_name()!r} running {runs}"


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
        _Leak("process", f"child process {pid}: {command}")
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


def _warning_leaks(caught: Iterable[warnings.WarningMessage]) -> list[_Leak]:
    return [
        _Leak("warning", _describe_warning(w))
        for w in caught
        if issubclass(w.category, ResourceWarning)
    ]


def _describe_warning(caught: warnings.WarningMessage) -> str:
    """Say where a ResourceWarning was emitted, and where its object was made.

    One emitted while this module collected garbage has no line of the caller's
    to show; ``tracemalloc``, if it traced the object, knows where it was made
    (the most recent frame outside the standard library).
    """
    if caught.filename == __file__:
        text = f"ResourceWarning at garbage collection: {caught.message}"
    else:
        text = f"ResourceWarning at {caught.filename}:{caught.lineno}: {caught.message}"
    made = (
        tracemalloc.get_object_traceback(caught.source)
        if caught.source is not None
        else None
    )
    if made:
        outside = [frame for frame in made if not _in_stdlib_file(frame.filename)]
        frame = (outside or list(made))[-1]
        text += f", made at {frame.filename}:{frame.lineno}"
    return text


def _in_stdlib_file(filename: str) -> bool:
    """Whether *filename* is a module of the standard library (not an installed one)."""
    paths = sysconfig.get_paths()
    installed = (paths["purelib"], paths["platlib"])
    return filename.startswith(paths["stdlib"]) and not filename.startswith(installed)


_LEAK_KINDS = ("fd", "thread", "process", "connection", "resource", "task", "warning")


class _Allowance:
    """The leaks a check lets pass: kinds, and predicates on a description."""

    __slots__ = ("_kinds", "_predicates")

    def __init__(self, ignore: Iterable[str | Callable[[str], bool]]) -> None:
        kinds: set[str] = set()
        predicates: list[Callable[[str], bool]] = []
        for item in ignore:
            if isinstance(item, str):
                if item not in _LEAK_KINDS:
                    known = ", ".join(map(repr, _LEAK_KINDS))
                    msg = f"ignore: unknown leak kind {item!r} (known: {known})"
                    raise ValueError(msg)
                kinds.add(item)
            else:
                predicates.append(item)
        self._kinds = frozenset(kinds)
        self._predicates = tuple(predicates)

    def __call__(self, leak: _Leak) -> bool:
        """Whether *leak* is allowed."""
        return leak.kind in self._kinds or any(
            allows(leak.text) for allows in self._predicates
        )


def _settled_leaks(
    before: ResourceSnapshot,
    settle: float,
    allowed: _Allowance | None = None,
    caught: Iterable[warnings.WarningMessage] = (),
) -> list[str]:
    """Return what leaked since *before*, giving each leak its time to go.

    Descriptors, threads, children, connections and tracked resources get up to
    *settle* seconds; an OS thread outside ``threading`` at least
    ``_THREAD_EXIT``; an asyncio task none (its loop cannot run while this
    waits), nor a ResourceWarning among *caught*.  The looks come 0.2 ms apart
    at first (a joined thread's OS thread ends within a millisecond or so),
    then further apart, up to every 20 ms.
    """
    allowed = allowed or _Allowance(())
    start, pause = time.monotonic(), 0.0002
    while True:
        leaks = [
            leak
            for leak in _leaks_between(before, ResourceSnapshot.take())
            if not allowed(leak)
        ]
        waited = time.monotonic() - start
        if not any(waited < _patience(leak, settle) for leak in leaks):
            break
        time.sleep(pause)
        pause = min(2 * pause, 0.02)
    leaks += [leak for leak in _warning_leaks(caught) if not allowed(leak)]
    return sorted(leak.text for leak in leaks)


def _patience(leak: _Leak, settle: float) -> float:
    """How many seconds *leak* is given to go away by itself."""
    if leak.kind in {"task", "warning"}:
        return 0.0
    return max(settle, _THREAD_EXIT) if leak.lingers else settle


def _warn_again(caught: list[warnings.WarningMessage], *, everything: bool) -> None:
    """Emit again the warnings a check recorded; ResourceWarnings only if *everything*.

    With *everything* (the block raised, and its error is the one worth
    reading), a warning that a filter turns into an error is dropped.
    """
    for w in caught:
        if not everything and issubclass(w.category, ResourceWarning):
            continue
        with contextlib.suppress(Warning) if everything else contextlib.nullcontext():
            warnings.warn_explicit(
                w.message, w.category, w.filename, w.lineno, source=w.source
            )
    caught.clear()


class LeakCheck:
    """Context manager that fails if its block leaves resources open.

    On exit it raises ``LeakError`` naming every file descriptor, thread (also
    one started outside ``threading``), child process (also an orphaned
    grandchild, on Linux), inet connection, unreleased tracked resource and
    unfinished task of the running event loop that the block left behind, and
    every object that the garbage collector closed (its ``ResourceWarning``).
    Threads and child processes get up to *settle* seconds to wind down.  An
    exception raised by the block itself propagates unchanged, and the leak
    check is skipped: the block's own error is the one worth reading.

    *ignore* lets leaks pass: each item is a kind of leak (``"fd"``,
    ``"thread"``, ``"process"``, ``"connection"``, ``"resource"``, ``"task"``,
    ``"warning"``), or a predicate called with a leak's description (the line
    the failure would show) that returns true to let it pass.  *warmup*, if
    given, is called on entry before the snapshot: what a first use acquires
    for the life of the process (a module that opens a file when imported, a
    loop made on first use) is then held before the block starts.

    While entered, it records the warnings emitted (on exit the other warnings
    are emitted again) and, on Linux, has the process adopt the orphans of its
    descendants: enter and exit it in one thread, nested checks in order.
    """

    __slots__ = ("_allowed", "_before", "_caught", "_settle", "_warmup", "_watch")

    def __init__(
        self,
        *,
        settle: float = 1.0,
        ignore: Iterable[str | Callable[[str], bool]] = (),
        warmup: Callable[[], object] | None = None,
    ) -> None:
        self._settle = settle
        self._allowed = _Allowance(ignore)
        self._warmup = warmup
        self._before: ResourceSnapshot | None = None
        self._caught: list[warnings.WarningMessage] = []
        self._watch: contextlib.ExitStack | None = None

    def __enter__(self) -> LeakCheck:
        if self._watch is not None:
            msg = "this LeakCheck is entered already"
            raise RuntimeError(msg)
        if self._warmup is not None:
            self._warmup()
        # Garbage made before the block is collected here, its warnings unrecorded.
        self._before = ResourceSnapshot.take()
        with contextlib.ExitStack() as watch:
            self._caught = watch.enter_context(warnings.catch_warnings(record=True))
            warnings.simplefilter("always", ResourceWarning)
            watch.enter_context(_OrphanAdoption())
            self._watch = watch.pop_all()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        watch, self._watch = self._watch, None
        if watch is None or self._before is None:
            return
        leaks: list[str] = []
        try:
            with watch:
                if exc_type is None:
                    leaks = _settled_leaks(
                        self._before, self._settle, self._allowed, self._caught
                    )
        finally:
            _warn_again(self._caught, everything=exc_type is not None)
        if leaks:
            raise LeakError("resources leaked:\n  " + "\n  ".join(leaks))

    def leaks(self) -> list[str]:
        """Describe what is held now that was not held on entry.

        Inside the block, the objects the garbage collector closed so far are
        named too.
        """
        if self._before is None:
            msg = "LeakCheck.leaks() needs the check to be entered first"
            raise RuntimeError(msg)
        found = _leaks_between(self._before, ResourceSnapshot.take())
        found += _warning_leaks(self._caught)
        return sorted(leak.text for leak in found if not self._allowed(leak))


@dataclass(frozen=True, slots=True)
class LeakReport:
    """What ``hunt_leaks`` measured on a scenario that leaked nothing."""

    warmups: int
    """Runs made before measuring."""
    memory_deltas: tuple[int, ...]
    """Bytes of traced memory each tracked run added (negative when it freed)."""


def _name(scenario: Callable[..., object]) -> str:
    func = getattr(scenario, "func", scenario)  # functools.partial
    name = getattr(func, "__qualname__", None)
    return name if isinstance(name, str) else repr(scenario)


def _call(scenario: Callable[[], object]) -> None:
    scenario()


def _scenario_filter() -> tracemalloc.Filter:
    """Keep only the traces allocated under a tracked call of the scenario."""
    line = max(line for *_, line in _call.__code__.co_lines() if line is not None)
    return tracemalloc.Filter(
        inclusive=True, filename_pattern=__file__, lineno=line, all_frames=True
    )


def _memory_growth(start: tracemalloc.Snapshot, limit: int, top: int = 3) -> list[str]:
    """Describe the allocations, live now, that grew most since *start*.

    Allocations made under a call of the scenario are shown; if the tracebacks
    are too short to reach that call, the largest of all are.
    """
    end = tracemalloc.take_snapshot()
    for filters in ([_scenario_filter()], _noise_filters()):
        stats = [
            stat
            for stat in end.filter_traces(filters).compare_to(
                start.filter_traces(filters), "traceback"
            )
            if stat.size_diff > 0
        ]
        if stats:
            break
    lines: list[str] = []
    for stat in stats[:top]:
        lines.append(
            f"+{stat.size_diff} B in {stat.count_diff:+d} block(s), allocated at:"
        )
        lines += stat.traceback.format(limit=limit, most_recent_first=True)
    return lines


def _noise_filters() -> list[tracemalloc.Filter]:
    """Exclude allocations made by the hunt's own bookkeeping."""
    return [
        tracemalloc.Filter(inclusive=False, filename_pattern=pattern)
        for pattern in (
            tracemalloc.__file__,
            warnings.__file__,
            __file__,
            "<string>",
            os.path.join(os.path.dirname(psutil.__file__), "*"),
        )
    ]


_WarningKey = tuple[str, type[Warning], str, int]


def _check_warnings(
    caught: list[warnings.WarningMessage],
    kept: dict[_WarningKey, warnings.WarningMessage],
    name: str,
) -> None:
    """Fail on a ResourceWarning among *caught*; keep one of each other warning.

    Garbage is collected first: an object the run dropped in a reference cycle
    warns now, not in a later run or after the last one.
    """
    gc.collect()
    leaks = [leak.text for leak in _warning_leaks(caught)]
    for w in caught:
        key = (str(w.message), w.category, w.filename, w.lineno)
        if not issubclass(w.category, ResourceWarning) and key not in kept:
            kept[key] = w
    caught.clear()
    if leaks:
        listed = "\n  ".join(leaks)
        msg = f"{name} let objects be garbage-collected unreleased:\n  {listed}"
        raise LeakError(msg)


def hunt_leaks(
    scenario: Callable[[], object],
    *,
    warmups: int = 3,
    runs: int = 5,
    memory_threshold: int = 1024,
    settle: float = 1.0,
    frames: int = 10,
) -> LeakReport:
    """Run *scenario* repeatedly and fail if any run leaks; return the measures.

    The method is the one of CPython's refleak hunter: *warmups* runs first, so
    that caches and lazy imports settle, then *runs* tracked runs, with
    ``gc.collect()`` after each.  It raises ``LeakError``:

    * as soon as a run leaves anything that ``LeakCheck`` sees (a descriptor,
      thread, child process or orphan, inet connection, tracked resource or
      task of the running loop) that was not there after the warm-ups (after
      waiting up to *settle* seconds for it to go away), naming it;
    * if any run, warm-ups included, lets an object be garbage-collected
      unreleased (a ``ResourceWarning``), naming where it was emitted;
    * if traced memory grows by more than *memory_threshold* bytes on EVERY
      tracked run (growth on only some runs is cache noise), naming the largest
      allocations still alive, with up to *frames* frames of traceback each.

    ``tracemalloc`` is started for the hunt (with *frames* frames) unless it is
    already tracing, and stopped afterwards.  An exception raised by *scenario*
    propagates unchanged.  The scenario runs in this process, so a leak of
    something it allocated once per process (a connection pool) is only found if
    the warm-ups do not absorb it: keep scenarios self-contained.
    """
    if warmups < 0 or runs < 1:
        msg = f"need warmups >= 0 and runs >= 1, got {warmups} and {runs}"
        raise ValueError(msg)
    name = _name(scenario)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(frames)
    kept: dict[_WarningKey, warnings.WarningMessage] = {}
    try:
        with _OrphanAdoption(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            baseline = ResourceSnapshot.take()
            for _ in range(warmups):
                _call(scenario)
                _check_warnings(caught, kept, name)
                baseline = ResourceSnapshot.take()
            # The look each run takes, once before memory is measured: what it
            # allocates on its first call only is not the scenario's growth.
            _settled_leaks(baseline, 0)
            start = tracemalloc.take_snapshot()
            deltas = [0] * runs
            before = tracemalloc.get_traced_memory()[0]
            for run in range(runs):
                _call(scenario)
                _check_warnings(caught, kept, name)
                leaks = _settled_leaks(baseline, settle)  # collects garbage first
                if leaks:
                    msg = (
                        f"{name} leaked on tracked run {run + 1} of {runs} "
                        f"(after {warmups} warm-up runs):\n  " + "\n  ".join(leaks)
                    )
                    raise LeakError(msg)
                after = tracemalloc.get_traced_memory()[0]
                deltas[run], before = after - before, after
            if all(delta > memory_threshold for delta in deltas):
                growth = _memory_growth(start, frames)
                msg = (
                    f"{name} grew memory on every tracked run, by {deltas} bytes "
                    f"(threshold {memory_threshold}); largest new allocations:\n"
                    + "\n".join(growth)
                )
                raise LeakError(msg)
    finally:
        if started:
            tracemalloc.stop()
        for w in kept.values():
            warnings.warn_explicit(
                w.message, w.category, w.filename, w.lineno, source=w.source
            )
    return LeakReport(warmups, tuple(deltas))


class _ChildTraceback(Exception):  # noqa: N818 - shown as the cause, not raised
    """Where an exception raised in ``run_with_fd_limit``'s child came from."""


def _child_main(
    report: Connection,
    scenario: Callable[[], object],
    limit: int,
    repeat: int,
    environ: dict[str, str],
) -> None:
    with report:
        try:
            leaked = _leaked_under_limit(scenario, limit, repeat, environ)
        except BaseException as error:  # noqa: BLE001 - sent to the parent, which raises
            report.send((_sendable(error, scenario), _format_traceback(error)))
        else:
            report.send(leaked)


def _sendable(error: BaseException, scenario: Callable[[], object]) -> BaseException:
    """*error* if the parent can raise it as it is, else a ``RuntimeError``."""
    msg = f"{_name(scenario)} raised {type(error).__name__}: {error}"
    if not isinstance(error, Exception):
        return RuntimeError(msg)
    try:
        pickle.loads(pickle.dumps(error))  # noqa: S301 - its own bytes
    except Exception:  # noqa: BLE001 - any failure to pickle or rebuild it
        return RuntimeError(msg + " (which cannot be pickled)")
    return error


def _format_traceback(error: BaseException) -> str:
    return "".join(traceback.format_exception(error)).rstrip()


def _leaked_under_limit(
    scenario: Callable[[], object],
    limit: int,
    repeat: int,
    environ: dict[str, str],
) -> list[str]:
    # The child is forked from the fork server, which kept the environment it was
    # started with: the scenario sees the caller's, as a spawned child would.
    os.environ.clear()
    os.environ.update(environ)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    scenario()
    gc.collect()
    before = _fds_below(limit)
    for _ in range(repeat):
        scenario()
    gc.collect()
    after = _fds_below(limit)
    return [f"{fd} ({after[fd]})" for fd in after.keys() - before.keys()]


def _fds_below(limit: int) -> dict[int, str]:
    """The open descriptors under *limit*, found without opening one.

    Under ``RLIMIT_NOFILE=limit`` every new descriptor is one of them; listing
    ``/proc/self/fd`` would need a descriptor of its own, which a scenario that
    used them all (and caught the ``EMFILE``) has left none of.
    """
    return {fd: _describe_fd(fd) for fd in range(limit) if _fd_is_open(fd)}


_CHILD_EXIT_GRACE = 10.0
"""Seconds that a child which has reported gets to exit by itself (its threads,
finalizers and flushes run) before it is killed."""


def _child_outcome(
    receiver: Connection, child: BaseProcess, name: str, timeout: float
) -> list[str] | tuple[BaseException, str] | None:
    """What *child* sent: leaked descriptors or an error; ``None`` if it is late.

    Raises ``RuntimeError`` if the child ended without sending anything (killed by
    a signal, or ``os._exit()``).
    """
    if not multiprocessing.connection.wait([receiver, child.sentinel], timeout):
        return None
    try:
        outcome: list[str] | tuple[BaseException, str] = receiver.recv()
    except EOFError:
        child.join()
        code = child.exitcode or 0
        try:
            how = f"was killed by {signal.Signals(-code).name}" if code < 0 else ""
        except ValueError:
            how = f"was killed by signal {-code}"
        how = how or f"exited with status {code}"
        msg = f"the child running {name} {how} before it reported"
        raise RuntimeError(msg) from None
    return outcome


def run_with_fd_limit(
    scenario: Callable[[], object],
    *,
    limit: int = 64,
    repeat: int = 1000,
    timeout: float = 120.0,
) -> None:
    """Run *scenario* *repeat* times in a child whose ``RLIMIT_NOFILE`` is *limit*.

    A scenario that leaks one descriptor per call runs out of descriptors after
    about *limit* calls and fails with ``EMFILE``; one that leaks less often is
    caught by the descriptor count, which must be the same after the last call as
    after the first.  *scenario* must be picklable (a module-level function, or a
    ``functools.partial`` of one).  The child is forked from multiprocessing's
    fork server, a fresh interpreter started on the first call and kept, like the
    resource tracker, for the life of the process: each child starts from the
    server's state, so it shares nothing with the parent, or with an earlier
    child, but the import path, the working directory and the environment (passed
    at each call).  Modules named with ``multiprocessing.set_forkserver_preload``
    before the first call are imported once, in the server, instead of in every
    child: preloading ``pytest`` and the package makes each call a fork instead
    of a new interpreter's start.  Raises
    ``LeakError`` naming the leaked descriptors (also when the scenario caught
    the ``EMFILE`` itself), and re-raises the scenario's own exception otherwise;
    one that is not an ``Exception`` (``pytest.fail()``, ``KeyboardInterrupt``,
    ``SystemExit``), or that pickle cannot send back, arrives as a
    ``RuntimeError`` naming it, with the child's traceback as its cause.  A child
    that ends without reporting (killed by a signal, ``os._exit()``) raises a
    ``RuntimeError`` saying how it ended; one still running after *timeout*
    seconds is killed, and ``TimeoutError`` is raised.
    """
    context = multiprocessing.get_context("forkserver")
    receiver, sender = context.Pipe(duplex=False)
    with receiver:
        with sender:
            arguments = (sender, scenario, limit, repeat, dict(os.environ))
            child = context.Process(target=_child_main, args=arguments, daemon=True)
            child.start()
        try:
            outcome = _child_outcome(receiver, child, _name(scenario), timeout)
            if outcome is not None:
                child.join(_CHILD_EXIT_GRACE)  # it reported: let it end by itself
        finally:
            if child.exitcode is None:
                child.kill()
            child.join()
            child.close()
    if outcome is None:
        msg = f"{_name(scenario)} still ran after {timeout} s: its child is killed"
        raise TimeoutError(msg)
    if isinstance(outcome, tuple):
        error, where = outcome
        raise error from _ChildTraceback(where)
    leaked = outcome
    if leaked:
        msg = (
            f"{_name(scenario)} leaked {len(leaked)} file descriptor(s) over "
            f"{repeat} calls with RLIMIT_NOFILE={limit}: {', '.join(sorted(leaked))}"
        )
        raise LeakError(msg)


# The contract checker


M = TypeVar("M")
_JUMP_BACK = dis.opmap["JUMP_BACKWARD"]
"""The opcode of a loop's jump back, where the interpreter checks for signals."""
_IO_MODULES = frozenset(
    {
        "posix",
        "io",
        "_io",
        "_socket",
        "socket",
        "select",
        "_sqlite3",
        "sqlite3",
        "_posixsubprocess",
        "fcntl",
    }
)
"""Modules whose C functions make system calls that can fail (``OSError``)."""
_AUDITED_CALLS = frozenset({"open", "socket.__new__", "mmap.__new__"})
"""Audit events raised just before the system call of a type call, which the
profiler does not see: ``io.FileIO()``, ``socket.socket()``, ``mmap.mmap()``."""
_WAITING_MODULES = _IO_MODULES | {"_thread", "time"}
_WAITING_CALLS = frozenset(
    {
        "_accept",
        "accept",
        "acquire",
        "connect",
        "flock",
        "lockf",
        "open",
        "poll",
        "read",
        "readinto",
        "readline",
        "recv",
        "recv_into",
        "recvfrom",
        "recvmsg",
        "select",
        "send",
        "sendall",
        "sendmsg",
        "sendto",
        "sleep",
        "wait",
        "wait3",
        "wait4",
        "waitid",
        "waitpid",
        "write",
    }
)
"""C functions of ``_WAITING_MODULES`` that may wait, and that a signal then
interrupts: its handler runs inside the call (PEP 475), and a
``KeyboardInterrupt`` comes out of the call, which did nothing."""


@contextlib.contextmanager
def _resource_warnings_raised() -> Iterator[None]:
    """Turn ``ResourceWarning`` into an error, as ``filterwarnings = error`` does.

    One raised in a finalizer goes to ``sys.unraisablehook``, which is made to
    drop it for the length of the block (the check that it is emitted at all runs
    without this); any other unraisable exception goes to the hook as before.
    """
    previous = sys.unraisablehook

    def drop_resource_warnings(unraisable: sys.UnraisableHookArgs) -> None:
        if not isinstance(unraisable.exc_value, ResourceWarning):
            previous(unraisable)

    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        sys.unraisablehook = drop_resource_warnings
        try:
            yield
        finally:
            sys.unraisablehook = previous


class ContractError(AssertionError):
    """Raised by ``check_resource`` when a class breaks the resource contract."""


class _BodyError(Exception):
    """Raised inside a ``with`` block by the checker."""


_RAISED = "raised in the body"
_OS_ERRORS: tuple[tuple[type[OSError], int], ...] = (
    (OSError, errno.EIO),
    (BlockingIOError, errno.EAGAIN),
    (ChildProcessError, errno.ECHILD),
    (BrokenPipeError, errno.EPIPE),
    (ConnectionAbortedError, errno.ECONNABORTED),
    (ConnectionRefusedError, errno.ECONNREFUSED),
    (ConnectionResetError, errno.ECONNRESET),
    (FileExistsError, errno.EEXIST),
    (FileNotFoundError, errno.ENOENT),
    (InterruptedError, errno.EINTR),
    (IsADirectoryError, errno.EISDIR),
    (NotADirectoryError, errno.ENOTDIR),
    (PermissionError, errno.EACCES),
    (ProcessLookupError, errno.ESRCH),
    (TimeoutError, errno.ETIMEDOUT),
    (socket.gaierror, socket.EAI_NONAME),
    (socket.herror, 1),  # HOST_NOT_FOUND
)
"""Each ``OSError`` class a release might treat apart (``except
BrokenPipeError:``, ``errno == EPIPE``), with the ``errno`` it comes with."""
_BODY_CHECKS = (
    "exception in the body",
    "OSError subclasses in the body",
    "KeyboardInterrupt in the body",
    "SystemExit in the body",
    "exception groups in the body",
)


def _body_errors() -> list[BaseException]:
    """A new instance of each exception the checker raises in a block, in turn.

    An ordinary exception; each ``OSError`` class of ``_OS_ERRORS``;
    ``KeyboardInterrupt`` and ``SystemExit``, which are not ``Exception``; an
    ``ExceptionGroup`` (of an ``OSError`` and an ordinary exception) and a
    ``BaseExceptionGroup`` (with a ``KeyboardInterrupt`` in it), which
    ``except*`` code takes apart.
    """
    errors: list[BaseException] = [_BodyError(_RAISED)]
    errors += [kind(number, _RAISED) for kind, number in _OS_ERRORS]
    errors += [KeyboardInterrupt(_RAISED), SystemExit(_RAISED)]
    members = [ConnectionResetError(errno.ECONNRESET, _RAISED), _BodyError(_RAISED)]
    errors.append(ExceptionGroup(_RAISED, members))
    errors.append(BaseExceptionGroup(_RAISED, [KeyboardInterrupt(_RAISED)]))
    return errors


def _kind_of(error: BaseException) -> str:
    return type(error).__qualname__


def _swallowed(error: BaseException, how: str) -> str:
    """The message for a block whose *error* did not come out of it."""
    return (
        f"the body's exception was swallowed: {error!r} was raised in the block and "
        f"{how} (an exception in the body must propagate unchanged)"
    )


def _expect_unchanged(error: BaseException, raised: BaseException) -> None:
    """Fail unless *raised*, what came out of a block that raised *error*, is it.

    The very object, not an equal one: ``raise type(exc)(...)`` or ``raise
    RuntimeError(...) from exc`` in an exit replace it.  The class's own
    exception is the ``ContractError``'s cause.
    """
    if raised is not error:
        msg = (
            f"the body's exception was replaced: {error!r} was raised in the block "
            f"and {raised!r} came out of it (an exception in the body must "
            "propagate unchanged)"
        )
        raise ContractError(msg) from raised


class _InjectedError(OSError):
    """The ``OSError`` that the checker injects in place of a system call."""


@dataclass(frozen=True, slots=True)
class ContractReport:
    """What ``check_resource`` or ``check_async_resource`` verified."""

    checks: tuple[str, ...]
    """The contract checks that passed, by name."""
    interrupts: int
    """``KeyboardInterrupt`` (or, for async classes, cancellations) injected."""
    failed_calls: int
    """System calls made to fail, one at a time, during acquisition and release."""
    released_by_finalizer: int
    """Injected faults after which a standard-library object was dropped and
    released by its own finalizer (a ``ResourceWarning`` of the standard library)."""


class _Held:
    """A cheap fingerprint of what the process holds: descriptors, threads, children.

    Threads are those of ``threading`` and those that run Python code outside it
    (started by ``_thread.start_new_thread``), seen once their code has started.
    """

    __slots__ = ("children", "fds", "threads")

    def __init__(self) -> None:
        self.fds = _open_fds()
        running = _running_threads()
        # The workers of the running loop's default executor live as long as the
        # loop.  The OS id tells a new thread from an ended one whose ident it
        # reuses.
        executor = _loop_executor_threads()
        self.threads: dict[tuple[int | None, int | None], str] = {
            (thread.ident, thread.native_id): repr(thread.name)
            for thread in running
            if thread.ident not in executor
        }
        self.threads.update(
            ((ident, None), f"outside threading, running {function}")
            for ident, function in _python_outside_threading(running).items()
        )
        self.children = {
            pid for pid in _child_pids(psutil.Process()) if not _reap_if_adopted(pid)
        }

    def leaks_since(self, before: _Held, *, describe: bool = False) -> list[str]:
        """Name what is held now and not in *before*.

        With *describe*, which takes longer, a child is named by its command line.
        """
        leaks = [
            f"file descriptor {fd} ({what})"
            for fd, what in self.fds.items()
            if before.fds.get(fd) != what
        ]
        leaks += [
            f"thread {name} (ident {key[0]})"
            for key, name in self.threads.items()
            if key not in before.threads
        ]
        leaks += [
            f"child process {pid}: {_describe_child(pid)}"
            if describe
            else f"child process {pid}"
            for pid in self.children - before.children
        ]
        return leaks


def _describe_child(pid: int) -> str:
    try:
        child = psutil.Process(pid)
        return f"{_command_of(child)} [{child.status()}]"
    except psutil.Error:
        return "ended meanwhile"


class _Sweep:
    """Inject one fault at the *target*-th point of the code it watches.

    Points are counted in every frame but the checker's own: with *kind*
    ``"interrupt"``, where the interpreter checks for signals and so may raise
    ``KeyboardInterrupt`` (a function's start, a loop's jump back, the return of
    each call into C, and the call itself for a C function that may wait, which
    a signal interrupts), except inside a block of ``deferred_interrupts()``,
    where a real one is held back; with ``"call"``, each call into a C function
    of an I/O module, and each type call that opens a file, a socket or a
    memory map (seen by its audit event), which fails with ``OSError`` instead
    of running.
    """

    __slots__ = (
        "calling",
        "fired",
        "kind",
        "previous",
        "seen",
        "stdlib",
        "target",
        "thread",
    )

    def __init__(self, kind: str, target: int, *, stdlib: bool = True) -> None:
        self.kind = kind
        self.stdlib = stdlib
        self.target = target
        self.seen = 0
        self.fired: BaseException | None = None
        self.previous: tuple[Any, Any] = (None, None)
        self.thread = threading.get_ident()
        self.calling: object = None

    def __enter__(self) -> _Sweep:
        # A tracer or profiler already there (coverage, a debugger) is put back.
        self.previous = (sys.gettrace(), sys.getprofile())
        if self.kind == "interrupt":
            sys.settrace(self._trace)  # type: ignore[arg-type]
        else:
            _AuditedSweep.watch(self)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._restore()

    def _restore(self) -> None:
        _AuditedSweep.watch(None)
        trace, profile = self.previous
        sys.settrace(trace)
        sys.setprofile(profile)

    def _point(
        self,
        frame: FrameType,
        fault: Callable[[], BaseException],
        *,
        entry: bool = False,
    ) -> None:
        filename = frame.f_code.co_filename
        if filename == __file__ or self.fired is not None:
            return
        if not self.stdlib and _in_stdlib(frame):
            caller = frame.f_back
            if not entry or caller is None or _in_stdlib(caller):
                return  # inside the standard library, not at its door
        if _in_finalizer(frame):  # run by the collector at no fixed point
            return
        if self.kind == "interrupt" and deferred_interrupts().deferring():
            return  # a real SIGINT would be held back until the block's end
        if self.seen < self.target:
            self.seen += 1
            return
        self._restore()
        self.fired = fault()
        raise self.fired

    def _trace(self, frame: FrameType, event: str, arg: object) -> object:
        if event == "call":
            frame.f_trace_lines = False
            frame.f_trace_opcodes = True
        elif event != "opcode" or frame.f_code.co_code[frame.f_lasti] != _JUMP_BACK:
            return self._trace
        self._point(
            frame,
            lambda: KeyboardInterrupt(f"injected at {_where(frame)}"),
            entry=event == "call",
        )
        return self._trace

    def _profile(self, frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is record_call.__code__:
            # record_call calls into C from C, where no profile event is seen.
            arg = frame.f_locals["function"]
            event = "c_call"
        if self.kind == "call":
            # The audit event raised inside a call already counted is the same
            # point, also after Python code the call ran (an argument's __fspath__).
            if event == "c_call" and _is_system_call(arg):
                self.calling = arg
            elif arg is self.calling or (
                event == "return" and frame.f_code is record_call.__code__
            ):
                self.calling = None
        if self.kind == "interrupt" and event == "c_return":
            self._point(
                frame,
                lambda: KeyboardInterrupt(
                    f"injected after {_qualname(arg)} in {_where(frame)}"
                ),
            )
        elif self.kind == "interrupt" and event == "c_call" and _may_wait(arg):
            self._point(
                frame,
                lambda: KeyboardInterrupt(
                    f"injected during {_qualname(arg)} in {_where(frame)}"
                ),
            )
        elif self.kind == "call" and event == "c_call" and self.calling is arg:
            self._point(
                frame,
                lambda: _InjectedError(
                    errno.EIO, f"injected failure of {_qualname(arg)}"
                ),
            )

    def audited(self, event: str, frame: FrameType) -> None:
        """Count the audit event *event* of a type call made in *frame*."""
        if self.calling is not None or _wraps_a_descriptor(event, frame):
            return
        self._point(
            frame, lambda: _InjectedError(errno.EIO, f"injected failure of {event}")
        )


class _AuditedSweep:
    """The audit hook that shows a failed-call sweep the type calls it must fail.

    An audit hook stays for the life of the interpreter: it is added once, at
    the first sweep, and does nothing but outside one.
    """

    sweep: _Sweep | None = None

    @classmethod
    def watch(cls, sweep: _Sweep | None) -> None:
        if sweep is not None:
            _add_audit_hook()
        cls.sweep = sweep

    @staticmethod
    def hook(event: str, args: tuple[object, ...]) -> None:
        sweep = _AuditedSweep.sweep
        if (
            sweep is not None
            and event in _AUDITED_CALLS
            and sweep.thread == threading.get_ident()
        ):
            sweep.audited(event, sys._getframe(1))


@functools.cache
def _add_audit_hook() -> None:
    sys.addaudithook(_AuditedSweep.hook)


def _wraps_a_descriptor(event: str, frame: FrameType) -> bool:
    """Whether a ``socket.socket()`` call only wraps a descriptor it was given.

    Such a call makes no system call; ``socket.accept()`` makes one around the
    descriptor it has just accepted.
    """
    return event == "socket.__new__" and frame.f_locals.get("fileno") is not None


def _in_stdlib(frame: FrameType) -> bool:
    return frame.f_code.co_filename.startswith(_stdlib_path())


def _in_finalizer(frame: FrameType | None) -> bool:
    """Whether *frame* runs inside a ``__del__`` method (a finalizer)."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        if frame.f_code.co_filename == __file__:
            return False
        frame = frame.f_back
    return False


@functools.cache
def _stdlib_path() -> str:
    return sysconfig.get_paths()["stdlib"]


def _caused_by(error: BaseException, injected: BaseException) -> bool:
    """Whether *error* is *injected*, or was raised because of it."""
    seen: set[int] = set()
    pending: list[object] = [error]
    while pending:
        item = pending.pop()
        if item is injected:
            return True
        if isinstance(item, BaseException) and id(item) not in seen:
            seen.add(id(item))
            pending += [item.__cause__, item.__context__, getattr(item, "reason", None)]
    return False


def _run_phase(
    phase: str,
    made: list[Any],
    factory: Callable[[], AbstractContextManager[Any]],
    checker: _Checker,
    body_error: _BodyError,
) -> bool:
    """Run *phase* on the object in *made* (made here for ``"enter"``).

    Returns whether ``__exit__`` swallowed *body_error*.
    """
    if phase == "enter":
        made.append(checker.make(factory))
        _enter(made[0])
    elif phase == "exit":
        _exit(made[0], None)
    elif phase == "close":
        made[0].close()
    else:
        return bool(_exit(made[0], body_error))
    return False


def _noted(error: BaseException, injected: BaseException) -> bool:
    """Whether *error*, which goes on, carries the *injected* failure as a note.

    A release that fails after the block raised lets the block's exception
    propagate, with the failure attached (``_cleanup``).
    """
    return isinstance(injected, Exception) and any(
        str(injected) in note for note in getattr(error, "__notes__", ())
    )


def _where(frame: FrameType) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"


def _qualname(function: object) -> str:
    return str(getattr(function, "__qualname__", function))


def _module_of(function: object) -> str:
    owner = getattr(function, "__self__", None)
    return getattr(function, "__module__", None) or type(owner).__module__


def _is_system_call(function: object) -> bool:
    name = getattr(function, "__name__", "")
    return _module_of(function) in _IO_MODULES and name not in (
        "close",
        "detach",
        "fileno",
    )


def _may_wait(function: object) -> bool:
    """Whether *function* is a C call that may wait, and a signal interrupt it.

    Known by name: a non-blocking call of one (``acquire(False)``) counts too.
    """
    name = getattr(function, "__name__", "")
    if name not in _WAITING_CALLS or _module_of(function) not in _WAITING_MODULES:
        return False
    owner = getattr(function, "__self__", None)
    if isinstance(owner, (io.BytesIO, io.StringIO)):
        return False  # in memory
    if name in ("connect", "poll"):
        # A socket's connect(), a poll object's poll(); not sqlite3.connect()
        # nor select.poll(), which makes the object.
        return isinstance(owner, socket.socket) or type(owner).__name__ == "poll"
    return True


def _enter(manager: Any) -> object:  # noqa: ANN401 - any context manager
    return type(manager).__enter__(manager)


def _exit(manager: Any, error: BaseException | None) -> object:  # noqa: ANN401
    if error is None:
        return type(manager).__exit__(manager, None, None, None)
    return type(manager).__exit__(manager, type(error), error, error.__traceback__)


def _release_fully(manager: Any) -> None:  # noqa: ANN401 - any context manager
    """Call ``close()`` until it returns normally (an injected fault may stop it)."""
    close = getattr(manager, "close", None)
    for _ in range(3):
        try:
            if close is not None:
                close()
        except Exception:  # noqa: BLE001, S112 - a release failure is allowed once
            continue
        return


class _Checker:
    """The state shared by the checks of one class: what was held before, warnings."""

    def __init__(self, released: Callable[[], bool] | None, settle: float) -> None:
        self.made: list[object] = []
        self.released = released
        self.settle = settle
        self.baseline = _Held()
        self.checks: list[str] = []
        self.faults = {"interrupt": 0, "call": 0}
        self.by_finalizer = 0
        self.caught: list[warnings.WarningMessage] = []
        self.tasks_before = _loop_tasks()

    def held_at_once(self, what: str) -> None:
        """``held()``, which collects garbage, only if something is held now.

        What an object released by itself is free without a collection (tens of
        milliseconds in a test session): only if something is still held does
        ``held()`` collect, wait and name it.
        """
        if _Held().leaks_since(self.baseline) or (
            self.released is not None and not self.released()
        ):
            self.held(what)
        else:
            self.made.clear()

    def held(self, what: str, *, probe: bool = True) -> None:
        """Fail if anything is held now that was not held before the checks.

        Threads and peers wind down in their own time: a leak must last
        ``settle`` seconds to count.  Without *probe*, the ``released`` probe is
        not asked.
        """
        for _ in self._settling(what, probe=probe):
            time.sleep(0.005)

    async def aheld_at_once(self, what: str) -> None:
        """``aheld()`` only if something is held now (see ``held_at_once``)."""
        await asyncio.sleep(0)
        if (
            _Held().leaks_since(self.baseline)
            or self._new_tasks()
            or (self.released is not None and not self.released())
        ):
            await self.aheld(what)
        else:
            self.made.clear()

    async def aheld(self, what: str, *, tasks_at_once: bool = True) -> None:
        """``held()`` that lets the event loop run while it waits, tasks included.

        When ``aclose()`` has returned, every task the object started has ended:
        one turn of the event loop is allowed, for a task it cancelled last.  With
        *tasks_at_once* false (an object the collector released, which cannot
        await), its tasks may take ``settle`` seconds, like threads.  From Python
        3.12 asyncio reaps a killed child through the loop itself.
        """
        await asyncio.sleep(0)
        running = self._new_tasks()
        if running and tasks_at_once:
            raise ContractError(f"{what} left running: {', '.join(running)}")
        for _ in self._settling(what, tasks=True):
            await asyncio.sleep(0.005)

    def _new_tasks(self) -> list[str]:
        return [
            f"task {_task_description(task)}"
            for task in _loop_tasks() - self.tasks_before
            if task is not asyncio.current_task()
        ]

    def _settling(
        self,
        what: str,
        *,
        probe: bool = True,
        tasks: bool = False,
    ) -> Iterator[None]:
        """Look for what is held until nothing is; yield whenever something is.

        The wait between two looks is the caller's (a sleep, or the event loop's
        turn).  Fails with ``ContractError`` naming what is still held once
        ``settle`` seconds have passed; forgets the objects made once nothing is.
        """
        deadline = time.monotonic() + self.settle
        while True:
            gc.collect()
            late = time.monotonic() > deadline
            leaks = _Held().leaks_since(self.baseline, describe=late)
            if tasks:
                leaks += self._new_tasks()
            if probe and self.released is not None and not self.released():
                leaks.append("the resource, by the released() probe")
            if not leaks:
                self.made.clear()
                return
            if late:
                raise ContractError(f"{what} left held: {', '.join(leaks)}")
            yield

    def make(self, factory: Callable[[], M]) -> M:
        """Make an object to check, remembered until the next ``held()`` passes."""
        manager = factory()
        self.made.append(manager)
        return manager

    def release_made(self) -> None:
        """Close what the checks made and left held (after a failed check)."""
        for manager in self.made:
            _release_fully(manager)
        self.made.clear()
        gc.collect()

    def count_finalized(self) -> None:
        """Count standard-library objects released by their finalizer, then forget."""
        self.by_finalizer += sum(
            issubclass(w.category, ResourceWarning) for w in self.caught
        )
        self.caught.clear()

    def collected_warns(self) -> None:
        """Fail unless an object collected while held emitted a ResourceWarning."""
        gc.collect()
        if not any(issubclass(w.category, ResourceWarning) for w in self.caught):
            msg = "an object collected while held emitted no ResourceWarning"
            raise ContractError(msg)
        self.caught.clear()

    def report(self) -> ContractReport:
        """What was checked, once every check passed."""
        unexpected = [
            w for w in self.caught if not issubclass(w.category, ResourceWarning)
        ]
        for w in unexpected:
            warnings.warn_explicit(
                w.message, w.category, w.filename, w.lineno, source=w.source
            )
        return ContractReport(
            tuple(self.checks),
            self.faults["interrupt"],
            self.faults["call"],
            self.by_finalizer,
        )


def check_resource(
    factory: Callable[[], AbstractContextManager[Any]],
    *,
    use: Callable[[Any], object] | None = None,
    released: Callable[[], bool] | None = None,
    interrupts: bool = True,
    stdlib_interrupts: bool = True,
    failed_calls: bool = True,
    limit: int = 2000,
    settle: float = 1.0,
) -> ContractReport:
    """Check that the objects *factory* makes keep the resource contract.

    Every check makes a new object with *factory* (each call must return a new,
    unentered context manager) and fails with ``ContractError`` naming the broken
    promise:

    * ``with`` acquires and releases: nothing is held afterwards (descriptors,
      threads, child processes, and *released*, a probe that returns true when
      the resource is free), and ``closed`` is true if the class has it; on
      Linux the check adopts orphans, as ``LeakCheck`` does, so a process that
      a child started and left behind counts as held;
    * an exception in the body propagates unchanged, and everything is released.
      Blocks raise, one each, every exception whose kind a release may treat
      apart: an ordinary ``Exception``; ``OSError`` and each of its subclasses
      that a release might special-case (``BlockingIOError``,
      ``ChildProcessError``, ``BrokenPipeError`` and the other
      ``ConnectionError`` classes, ``FileExistsError``, ``FileNotFoundError``,
      ``InterruptedError``, ``IsADirectoryError``, ``NotADirectoryError``,
      ``PermissionError``, ``ProcessLookupError``, ``TimeoutError``,
      ``socket.gaierror``, ``socket.herror``), each with its ``errno``;
      ``KeyboardInterrupt`` and ``SystemExit``, which are not ``Exception``; an
      ``ExceptionGroup`` and a ``BaseExceptionGroup``, which ``except*`` takes
      apart.  Each must come out of the ``with`` statement as the very object
      raised (identity, not equality): an exit that returns true for it, or
      raises another exception (a copy, or one of its own ``from`` it), fails
      with ``ContractError`` saying that the body's exception was swallowed or
      replaced and naming it, chained from the exception that came out instead.
      An exit that is right for the one exception a test happens to raise may
      swallow a ``BrokenPipeError`` as "the peer went away", or a
      ``KeyboardInterrupt`` as "stop quietly", and the code after the block then
      runs as if nothing had happened;
    * a second ``with``, inside or after the first, raises ``ReentryError``;
    * ``close()``, if the class has it, may be called twice after the block, and
      the second call closes no descriptor that the process opened meanwhile
      (one that took the number the block released);
    * *use*, called with the object, works inside the block and raises
      ``ClosedResourceError`` after it;
    * an object collected while it holds its resource emits a
      ``ResourceWarning`` and releases it, also when that warning is an error
      (``filterwarnings = error``, ``-W error``), so it must release first;
    * with *interrupts*, ``KeyboardInterrupt`` is raised at every point inside
      the *factory* call and ``__enter__``, ``__exit__`` (after a block that
      succeeded, and after one that raised) and ``close()`` where the
      interpreter could deliver one (a deterministic sweep by a trace function:
      each function's start, each loop's jump back, each return from a C
      function, and in place of each C call that may wait, such as
      ``os.waitpid`` or ``lock.acquire``, which a signal interrupts; in the
      standard library too, but not inside a block that defers interrupts, where
      a real one would wait); after each, the interrupt propagates and nothing
      stays held once ``close()`` has run (with ``stdlib_interrupts=False``,
      points inside the standard library's own Python code are skipped, but for
      the start of each standard-library function the class calls: use it for a
      class built on one that is not interrupt-safe itself, such as
      ``threading.Semaphore``, and document that window, or to keep the sweep
      of a deep call such as ``urlopen`` short);
    * with *failed_calls*, each call that those same phases make into a C
      function of an I/O module (``os``, ``io``, ``socket``, ``select``,
      ``sqlite3``, ``_posixsubprocess``, ``fcntl``), and each ``io.FileIO()``,
      ``socket.socket()`` and ``mmap.mmap()`` (seen by their audit events), fails
      with ``OSError``, one at a time: the injected error (or one raised because
      of it) propagates, or, in the exit of a block that raised, goes with the
      block's exception as a note; and nothing stays held once ``close()`` has
      run.  A release that a failed call stopped may leave what it had still to
      do (a failed ``unlink`` leaves its file): after a failure injected into
      ``__exit__`` or ``close()``, *released* is not asked, and only
      descriptors, threads and children must be free.  A C type that raises no
      audit event (``select.epoll()``) is not made to fail.

    The interrupt sweep must run in the main thread, where Python raises
    ``KeyboardInterrupt``; it puts Python's ``SIGINT`` handler in place for its
    length if the signal is ignored (as in a background job) or left to the
    system.  Whatever must be released is given *settle* seconds to go (threads end,
    peers close).  At most *limit* faults of each kind are injected per phase.  A
    standard-library object dropped by an injected fault may be released by its
    own finalizer: its ``ResourceWarning`` is counted in the report, not raised.
    The failed-call sweep adds an audit hook (``sys.addaudithook``) once: it
    stays for the life of the interpreter and does nothing outside a sweep.
    """
    checker = _Checker(released, settle)
    with _OrphanAdoption(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        checker.caught = caught
        try:
            closable = _check_lifecycle(factory, use, checker)
            phases = _PHASES if closable else _PHASES[:-1]
            if interrupts:
                with _interrupts_raised():
                    for phase in phases:
                        sweep = _Sweep("interrupt", 0, stdlib=stdlib_interrupts)
                        checker.faults["interrupt"] += _sweep(
                            factory, sweep, phase, limit, checker
                        )
                checker.checks.append("interrupt sweep")
            if failed_calls:
                for phase in phases:
                    checker.faults["call"] += _sweep(
                        factory, _Sweep("call", 0), phase, limit, checker
                    )
                checker.checks.append("failed system calls")
        finally:
            checker.release_made()
    return checker.report()


@contextlib.contextmanager
def _interrupts_raised() -> Iterator[None]:
    """Give ``SIGINT`` Python's handler for the length of an interrupt sweep.

    A real ``KeyboardInterrupt`` comes only from that handler, and
    ``deferred_interrupts()`` holds one back only while a Python handler is in
    place.  A process started in the background inherits ``SIGINT`` ignored; a
    sweep there would inject interrupts into blocks that defer them.
    """
    if threading.current_thread() is not threading.main_thread():
        msg = "the interrupt sweep must run in the main thread (interrupts=False)"
        raise RuntimeError(msg)
    previous = signal.getsignal(signal.SIGINT)
    if previous not in {signal.SIG_IGN, signal.SIG_DFL}:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _raise(error: BaseException) -> None:
    raise error


def _check_body_errors(
    factory: Callable[[], AbstractContextManager[Any]], checker: _Checker
) -> None:
    """Raise each of ``_body_errors()`` in a block: it must come out, released."""
    for error in _body_errors():
        manager = checker.make(factory)
        try:
            with manager:
                _raise(error)
        except BaseException as raised:  # noqa: BLE001 - each must come out
            _expect_unchanged(error, raised)
        else:
            raise ContractError(_swallowed(error, "the code after the block ran"))
        finally:
            error.__traceback__ = None  # its frames would keep the object alive
        _expect_closed(manager)
        checker.held_at_once(f"a block that raised {_kind_of(error)}")
    checker.checks += list(_BODY_CHECKS)


def _check_lifecycle(
    factory: Callable[[], AbstractContextManager[Any]],
    use: Callable[[Any], object] | None,
    checker: _Checker,
) -> bool:
    """Check the lifecycle; return whether the class has ``close()``."""
    manager = checker.make(factory)
    with manager:
        if use is not None:
            use(manager)
        during = _open_fds()
    _expect_closed(manager)
    checker.held("a plain block")
    close = getattr(manager, "close", None)
    if close is not None:
        with _reused_descriptors_kept(during, "close() after the block"):
            try:
                close()  # the end of the block closed it: the second time
            except Exception as failure:
                msg = f"close() after the block raised {failure!r}"
                raise ContractError(msg) from failure
        checker.checks.append("close twice")
    if use is not None:
        _expect_raises(ClosedResourceError, use, manager, "use after close")
        checker.checks.append("use after close")
    checker.made.append(manager)  # released at the end if it can be re-entered
    _expect_raises(ReentryError, _enter, manager, "a second with after the first")
    checker.checks += ["with", "re-entry after exit"]

    _check_body_errors(factory, checker)

    nested = checker.make(factory)
    with nested:
        _expect_raises(ReentryError, _enter, nested, "a nested second with")
    checker.held("a block entered twice")
    checker.checks.append("re-entry inside the block")

    _enter(factory())
    checker.collected_warns()
    checker.held("an object collected while held")
    with _resource_warnings_raised():
        _enter(factory())
        gc.collect()
    checker.held("an object collected while held, with ResourceWarning an error")
    checker.checks.append("collected while held")
    return close is not None


_PHASES = ("enter", "exit", "exit of a block that raised", "close")
"""Where faults are injected: the factory call and ``__enter__``, ``__exit__``
after a block that succeeded and after one that raised, and ``close()``."""


def _sweep(
    factory: Callable[[], AbstractContextManager[Any]],
    sweep: _Sweep,
    phase: str,
    limit: int,
    checker: _Checker,
) -> int:
    """Inject one fault at each point of *phase* in turn; return how many."""
    for target in range(limit):
        made: list[Any] = []
        if phase != "enter":
            made.append(checker.make(factory))
            _enter(made[0])
        sweep = _Sweep(sweep.kind, target, stdlib=sweep.stdlib)
        body_error = _BodyError("raised in the body")
        swallowed = False
        try:
            with sweep:
                swallowed = _run_phase(phase, made, factory, checker, body_error)
        except BaseException as error:
            if sweep.fired is None or not _caused_by(error, sweep.fired):
                msg = f"{sweep.fired!r} was injected in {phase}, {error!r} propagated"
                raise ContractError(msg) from error
        else:
            if sweep.fired is not None and not _noted(body_error, sweep.fired):
                msg = f"{sweep.fired!r} injected in {phase} was swallowed"
                raise ContractError(msg)
            if swallowed:
                raise ContractError(f"the body's exception was swallowed in {phase}")
        if sweep.fired is None and phase == "enter":
            _exit(made[0], None)  # entered with no fault: the block ends, for a
            # class without close() too
        while made:
            _release_fully(made.pop())
        if sweep.fired is None:
            return target
        fault = repr(sweep.fired)
        sweep.fired.__traceback__ = None  # its frames would keep dropped objects alive
        checker.count_finalized()
        # What a failed release call would have released, it could not: the
        # probe is not asked; descriptors, threads and children must be free.
        failed_release = sweep.kind == "call" and phase != "enter"
        checker.held(f"{fault} in {phase}", probe=not failed_release)
    return limit


async def check_async_resource(
    factory: Callable[[], AbstractAsyncContextManager[Any]],
    *,
    use: Callable[[Any], Awaitable[object]] | None = None,
    released: Callable[[], bool] | None = None,
    cancellations: bool = True,
    limit: int = 2000,
    settle: float = 1.0,
) -> ContractReport:
    """Check that the objects *factory* makes keep the async resource contract.

    The asynchronous twin of ``check_resource``, to be awaited in a running
    event loop: ``async with`` acquires and releases; an exception in the body
    propagates unchanged (the same exceptions as ``check_resource`` raises, each
    the very object); so does the ``CancelledError`` of a block cancelled in its
    body, by ``task.cancel()`` and by an ``asyncio.timeout()`` that expires
    there (swallowed, the code after the block runs although the task was
    cancelled, or the timeout expired: ``asyncio.timeout()`` raises
    ``TimeoutError`` only for a cancellation that comes out of the block); a
    second ``async with`` raises ``ReentryError``;
    ``aclose()`` may be awaited twice; *use* (awaited with the object) works in
    the block and raises ``ClosedResourceError`` after it; an object collected
    while held emits a ``ResourceWarning``.  Tasks count as held: one the object
    started must have ended when ``aclose()`` returns.  With
    *cancellations*, the task running a block is cancelled at each of its
    suspension points in turn, until the block finishes first: after each,
    ``aclose()`` leaves nothing held.  Then the same sweep runs on ``aclose()``
    alone, and a cancelled ``aclose()`` must have released everything by itself,
    as trio's resource contract requires.  In both sweeps a task cancelled
    before it finished must end with ``CancelledError``: a block or an
    ``aclose()`` that returns normally lost its cancellation.  *limit* and
    *settle* are those of ``check_resource``.
    """
    checker = _Checker(released, settle)
    with _OrphanAdoption(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        checker.caught = caught
        try:
            await _check_async_lifecycle(factory, use, checker)
            if cancellations:
                for phase in ("block", "aclose"):
                    checker.faults["interrupt"] += await _cancel_sweep(
                        factory, phase, limit, checker
                    )
                checker.checks.append("cancellation sweep")
        finally:
            for manager in checker.made:
                aclose = getattr(manager, "aclose", None)
                if aclose is not None:
                    with contextlib.suppress(Exception):
                        await aclose()
            checker.release_made()
    return checker.report()


async def _check_async_collection(
    factory: Callable[[], AbstractAsyncContextManager[Any]], checker: _Checker
) -> None:
    """Check that an object collected while held warns and releases."""
    held_manager = factory()
    await type(held_manager).__aenter__(held_manager)
    del held_manager
    checker.collected_warns()
    await asyncio.sleep(0)
    await checker.aheld("an object collected while held", tasks_at_once=False)
    with _resource_warnings_raised():
        held_manager = factory()
        await type(held_manager).__aenter__(held_manager)
        del held_manager
        gc.collect()
    await asyncio.sleep(0)
    what = "an object collected while held, with ResourceWarning an error"
    await checker.aheld(what, tasks_at_once=False)


async def _check_async_body_errors(
    factory: Callable[[], AbstractAsyncContextManager[Any]], checker: _Checker
) -> None:
    """``_check_body_errors`` for ``async with``, and a block cancelled two ways."""
    for error in _body_errors():
        manager = checker.make(factory)
        try:
            async with manager:
                _raise(error)
        except BaseException as raised:  # noqa: BLE001 - each must come out
            _expect_unchanged(error, raised)
        else:
            raise ContractError(_swallowed(error, "the code after the block ran"))
        finally:
            error.__traceback__ = None  # its frames would keep the object alive
        _expect_closed(manager)
        await checker.aheld_at_once(f"a block that raised {_kind_of(error)}")
    checker.checks += list(_BODY_CHECKS)
    for timeout in (False, True):
        await _check_cancelled_block(factory, checker, timeout=timeout)
    checker.checks += ["cancellation in the body", "timeout in the body"]


async def _check_async_lifecycle(
    factory: Callable[[], AbstractAsyncContextManager[Any]],
    use: Callable[[Any], Awaitable[object]] | None,
    checker: _Checker,
) -> None:
    manager = checker.make(factory)
    async with manager:
        if use is not None:
            await use(manager)
        during = _open_fds()
    _expect_closed(manager)
    await checker.aheld("a plain block")
    if hasattr(manager, "aclose"):
        with _reused_descriptors_kept(during, "aclose() after the block"):
            try:
                await manager.aclose()  # the end of the block closed it: again
            except Exception as failure:
                msg = f"aclose() after the block raised {failure!r}"
                raise ContractError(msg) from failure
        checker.checks.append("aclose twice")
    if use is not None:
        try:
            await use(manager)
        except ClosedResourceError:
            checker.checks.append("use after close")
        else:
            raise ContractError("use after close raised no ClosedResourceError")
    try:
        await type(manager).__aenter__(manager)
    except ReentryError:
        checker.checks += ["async with", "re-entry after exit"]
    else:
        raise ContractError("a second async with raised no ReentryError")

    await _check_async_body_errors(factory, checker)

    await _check_async_collection(factory, checker)
    checker.checks.append("collected while held")


@dataclass
class _CancelledBlock:
    """What a block that was cancelled in its body let through."""

    entered: asyncio.Future[None]
    """Done once the body runs."""
    arrived: BaseException | None = None
    """The ``CancelledError`` that the body got."""
    out: BaseException | None = None
    """What came out of the ``async with`` statement."""
    after: bool = False
    """Whether the code after the block ran."""
    timed_out: BaseException | None = None
    """What came out of the ``asyncio.timeout()`` block around it."""


async def _wait_in_block(
    manager: AbstractAsyncContextManager[Any],
    seen: _CancelledBlock,
    scope: asyncio.Timeout | None,
) -> None:
    """Enter *manager* and wait in its body until cancelled; note what passes."""
    try:
        async with manager:
            if scope is not None:  # it expires at the next turn of the loop
                scope.reschedule(asyncio.get_running_loop().time())
            seen.entered.set_result(None)
            try:
                await asyncio.get_running_loop().create_future()  # for ever
            except BaseException as arrived:
                seen.arrived = arrived
                raise
    except BaseException as out:
        seen.out = out
        raise
    seen.after = True


async def _timed_block(
    manager: AbstractAsyncContextManager[Any], seen: _CancelledBlock
) -> None:
    """``_wait_in_block`` in an ``asyncio.timeout()`` that expires in the body."""
    try:
        async with asyncio.timeout(None) as scope:
            await _wait_in_block(manager, seen, scope)
    except BaseException as out:
        seen.timed_out = out
        raise


async def _check_cancelled_block(
    factory: Callable[[], AbstractAsyncContextManager[Any]],
    checker: _Checker,
    *,
    timeout: bool,
) -> None:
    """Cancel a block in its body, by ``task.cancel()`` or by a timeout.

    The ``CancelledError`` that the body gets must come out of the ``async
    with`` statement, the very object: an exit that swallows it lets the code
    after the block run although the task was cancelled (or the timeout
    expired), and one that replaces it turns a cancellation into an error.
    """
    manager = checker.make(factory)
    seen = _CancelledBlock(asyncio.get_running_loop().create_future())
    how = "an asyncio.timeout() that expired" if timeout else "task.cancel()"
    if timeout:
        block = _timed_block(manager, seen)
    else:
        block = _wait_in_block(manager, seen, None)
    task = asyncio.ensure_future(block)
    try:
        if not timeout:
            first = asyncio.FIRST_COMPLETED
            await asyncio.wait((task, seen.entered), return_when=first)
            task.cancel()
        await asyncio.wait((task,))
    finally:
        if not task.done():  # the checker itself was cancelled
            task.cancel()
    ended = _exception_of(task)  # retrieved: a TimeoutError, or the class's own
    arrived, out = seen.arrived, seen.out
    seen.arrived = seen.out = seen.timed_out = None
    if not isinstance(arrived, asyncio.CancelledError):
        msg = f"the block cancelled by {how} never got CancelledError in its body"
        raise ContractError(msg) from (out or ended)
    what = f"CancelledError from {how}"
    if seen.after:
        after = "the code after the block ran"
        raise ContractError(_swallowed_cancellation(what, after))
    if out is not arrived:
        msg = (
            f"the body's cancellation was replaced: {what} was raised in the block "
            f"and {out!r} came out of it (a cancellation must propagate unchanged)"
        )
        raise ContractError(msg) from out
    arrived.__traceback__ = None
    del arrived, out, ended, task, block
    _expect_closed(manager)
    await checker.aheld_at_once(f"a block cancelled by {how}")


def _swallowed_cancellation(what: str, how: str) -> str:
    return (
        f"the body's cancellation was swallowed: {what} was raised in the block and "
        f"{how} (a cancellation must propagate unchanged)"
    )


def _exception_of(task: asyncio.Future[Any]) -> BaseException | None:
    if task.cancelled():
        return None
    return task.exception()


async def _block(manager: AbstractAsyncContextManager[Any]) -> None:
    async with manager:
        await asyncio.sleep(0)


def _suspended_at(task: asyncio.Task[Any]) -> tuple[object, ...]:
    """Where each coroutine of the task's await chain stands, and what it awaits.

    What is awaited is a new object at each suspension (a future, the generator
    of an ``asyncio.sleep()``), also when a loop suspends at the same ``await``
    again: the tuple holds them, so equal tuples mean the task has not moved.
    """
    where: list[object] = []
    awaited: Any = task.get_coro()
    while awaited is not None:
        where.append(awaited)
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None:
            break
        where.append((frame.f_code, frame.f_lasti))
        awaited = getattr(awaited, "cr_await", None) or getattr(
            awaited, "gi_yieldfrom", None
        )
    return tuple(where)


async def _advance(task: asyncio.Task[Any], moves: int) -> None:
    """Let *task* start, then move between suspension points *moves* times.

    Loop iterations in which the task stays suspended where it was (waiting for
    a thread or a child) are not counted: cancelling in any of them is the same
    fault.
    """
    await asyncio.sleep(0)
    where = _suspended_at(task)
    while moves > 0 and not task.done():
        await asyncio.sleep(0)
        now = _suspended_at(task)
        if now != where:
            moves, where = moves - 1, now


async def _cancel_sweep(
    factory: Callable[[], AbstractAsyncContextManager[Any]],
    phase: str,
    limit: int,
    checker: _Checker,
) -> int:
    """Cancel *phase* at its 1st, 2nd, ... suspension point; return how many."""
    for target in range(limit):
        manager: Any = checker.make(factory)
        if phase == "aclose":
            if not hasattr(manager, "aclose"):
                return 0  # released by __aexit__ alone: the block's sweep covers it
            await type(manager).__aenter__(manager)
        task = asyncio.ensure_future(
            _block(manager) if phase == "block" else manager.aclose()
        )
        await _advance(task, target)
        finished = task.done()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if finished:
                msg = f"{phase} finished but raised CancelledError"
                raise ContractError(msg) from None
        else:
            if not finished:
                where = f"cancelled at suspension point {target}"
                what = "aclose()" if phase == "aclose" else "a block"
                msg = (
                    f"{what} {where} returned normally: its cancellation was "
                    "swallowed (a cancelled task must raise CancelledError)"
                )
                raise ContractError(msg)
        if phase == "block":
            aclose = getattr(manager, "aclose", None)
            if aclose is not None:
                await aclose()
        elif getattr(manager, "closed", True) is not True:
            msg = f"a cancelled aclose() did not close {manager!r}"
            raise ContractError(msg)
        del manager, task
        checker.count_finalized()
        await checker.aheld(f"{phase} cancelled at suspension point {target}")
        if finished:
            return target
    return limit


@contextlib.contextmanager
def _reused_descriptors_kept(during: dict[int, str], what: str) -> Iterator[None]:
    """Fail if *what* closes a descriptor at a number that the block released.

    Each number open in the block (*during*) and free now is taken by a new
    descriptor first (a new one takes the lowest free number): a second close
    that closes such a number again closes somebody else's file.
    """
    freed = {fd for fd in during if not _fd_is_open(fd)}
    sentinels: dict[int, os.stat_result] = {}
    try:
        for _ in range(max(freed, default=-1) + 1):  # a number can be taken meanwhile
            if not freed - sentinels.keys():
                break
            fd = os.open(os.devnull, os.O_RDONLY)
            sentinels[fd] = os.fstat(fd)
        yield
        closed = [fd for fd, opened in sentinels.items() if not _still(fd, opened)]
        if closed:
            msg = f"{what} closed file descriptor {closed[0]}, no longer its own"
            raise ContractError(msg)
    finally:
        for fd, opened in sentinels.items():
            if _still(fd, opened):
                os.close(fd)


def _still(fd: int, opened: os.stat_result) -> bool:
    """Whether *fd* is still the descriptor that *opened* describes."""
    try:
        return os.path.samestat(os.fstat(fd), opened)
    except OSError:
        return False


def _expect_closed(manager: object) -> None:
    if getattr(manager, "closed", True) is not True:
        raise ContractError(f"{manager!r}.closed is not true after its block")


def _expect_raises(
    kind: type[BaseException],
    action: Callable[[Any], object],
    argument: object,
    what: str,
) -> None:
    try:
        action(argument)
    except kind:
        return
    except BaseException as error:
        raise ContractError(f"{what} raised {error!r}, not {kind.__name__}") from error
    raise ContractError(f"{what} raised nothing, not {kind.__name__}")
