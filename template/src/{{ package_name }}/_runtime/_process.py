"""What the process holds, read from the operating system.

Open descriptors and what they refer to, sockets and their connections, child
processes (and the orphans this process adopts while a check runs), threads
(also those started outside ``threading``), and the running event loop's tasks.
``snapshot`` puts them together; Linux's ``/proc`` is read where it is there.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import fcntl
import functools
import os
import socket
import sys
import threading
import time
from stat import S_IFMT
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from types import FrameType


_FD_DIRS = ("/proc/self/fd", "/dev/fd")
_SOCKET_KINDS: dict[tuple[int, int], str] = {
    (socket.AF_INET, socket.SOCK_STREAM): "tcp",
    (socket.AF_INET6, socket.SOCK_STREAM): "tcp6",
    (socket.AF_INET, socket.SOCK_DGRAM): "udp",
    (socket.AF_INET6, socket.SOCK_DGRAM): "udp6",
}


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


def _describe_child(pid: int) -> str:
    try:
        child = psutil.Process(pid)
        return f"{_command_of(child)} [{child.status()}]"
    except psutil.Error:
        return "ended meanwhile"
