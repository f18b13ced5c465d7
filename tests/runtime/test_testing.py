"""The leak toolkit catches each kind of leak and stays quiet on correct code."""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import fcntl
import functools
import gc
import importlib
import io
import logging
import multiprocessing.util
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
import warnings
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import psutil
import pytest
from _runtime._process import _asked_connections, _listed_connections, _open_fds
from _runtime._resource import deferred_interrupts
from _runtime.async_conformance import _check_cancelled_block
from _runtime.conformance import _Checker
from _runtime.errors import ClosedResourceError, ReentryError
from _runtime.helpers import (
    CleanupStack,
    live_resources,
    record_call,
    tracked_resource,
)
from _runtime.testing import (
    ContractError,
    LeakCheck,
    LeakError,
    ResourceSnapshot,
    check_async_resource,
    check_resource,
    hunt_leaks,
    run_with_fd_limit,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import TracebackType


@tracked_resource
class Handle:
    """A tracked resource that holds nothing but its state."""

    __slots__ = ("_state", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._state = "new"

    def __repr__(self) -> str:
        return f"Handle({self.name!r})"

    def __enter__(self) -> Handle:
        self._state = "open"
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._state = "closed"


class SubHandle(Handle):
    """Subclasses of a tracked class are tracked too."""

    __slots__ = ()


# One deliberate leak of each kind.  Each registers its own cleanup and returns a
# pattern that the LeakError message must contain.  The tests release the leaks
# before they return, so that they pass under ``pytest --leak-check`` too.


def _leak_file(directory: Path, cleanup: CleanupStack) -> str:
    stream = open(directory / "leaked.txt", "w", encoding="utf-8")  # noqa: SIM115
    cleanup.callback(stream.close)
    return r"file descriptor \d+ \(/.*leaked\.txt\)"


def _leak_socket(directory: Path, cleanup: CleanupStack) -> str:
    server = socket.create_server(("127.0.0.1", 0))
    cleanup.callback(server.close)
    port = server.getsockname()[1]
    return rf"socket tcp 127\.0\.0\.1:{port} -> - \[LISTEN\]"


def _leak_thread(directory: Path, cleanup: CleanupStack) -> str:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="leaky-worker")
    thread.start()
    cleanup.callback(thread.join)
    cleanup.callback(stop.set)
    return r"thread 'leaky-worker'"


def _wait_for(event: threading.Event, done: threading.Event) -> None:
    event.wait()
    done.set()


def _leak_unthreaded(directory: Path, cleanup: CleanupStack) -> str:
    stop, done = threading.Event(), threading.Event()
    _thread.start_new_thread(_wait_for, (stop, done))
    cleanup.callback(done.wait)
    cleanup.callback(stop.set)
    return r"thread \d+ outside threading \(.*running .*_wait_for \(.*test_testing"


def _leak_child(directory: Path, cleanup: CleanupStack) -> str:
    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    child = subprocess.Popen(command)  # noqa: S603 - fixed command
    cleanup.callback(child.wait)
    cleanup.callback(child.kill)
    return rf"child process {child.pid}: .*time\.sleep\(60\)"


def _leak_resource(directory: Path, cleanup: CleanupStack) -> str:
    handle = SubHandle("leaked").__enter__()
    cleanup.callback(handle.__exit__, None, None, None)
    return r"unreleased Handle\('leaked'\)"


LEAKS: dict[str, Callable[[Path, CleanupStack], str]] = {
    "file": _leak_file,
    "socket": _leak_socket,
    "thread": _leak_thread,
    "unthreaded": _leak_unthreaded,
    "child": _leak_child,
    "resource": _leak_resource,
}

_HOARD: list[object] = []


def _leak_memory() -> None:
    _HOARD.append(bytearray(8192))


def _correct_use(directory: Path) -> None:
    with open(directory / "fine.txt", "w", encoding="utf-8") as stream:
        stream.write("data")
    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.create_connection(server.getsockname()) as client,
    ):
        connection, _ = server.accept()
        with connection:
            client.sendall(b"x")
            assert connection.recv(1) == b"x"
    worker = threading.Thread(target=sum, args=([1, 2],), name="short-worker")
    worker.start()
    worker.join()
    with SubHandle("fine"):
        pass
    scratch = [bytearray(1000) for _ in range(50)]
    del scratch


def _run_child() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


# LeakCheck


@pytest.mark.parametrize("kind", LEAKS)
def test_leak_check_names_each_kind_of_leak(kind: str, tmp_path: Path) -> None:
    with CleanupStack() as cleanup:
        check = LeakCheck(settle=0)
        with pytest.raises(LeakError, match="resources leaked") as caught, check:
            pattern = LEAKS[kind](tmp_path, cleanup)
    assert re.search(pattern, str(caught.value)), str(caught.value)


def test_leak_check_is_quiet_on_correct_code(tmp_path: Path) -> None:
    with LeakCheck(settle=0) as check:
        for _ in range(20):
            _correct_use(tmp_path)
        _run_child()
        assert check.leaks() == []


def test_leak_check_waits_for_threads_winding_down() -> None:
    finishing = threading.Timer(0.05, lambda: None)
    with LeakCheck(settle=2.0):
        finishing.start()
    assert not finishing.is_alive()


def _wait_until_gone(path: str) -> None:
    """Wait until the OS thread behind *path* has ended (``join()`` returns first)."""
    deadline = time.monotonic() + 10
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.001)


def test_leak_check_sees_a_new_thread_that_reuses_an_ident() -> None:
    stop_old, stop_new = threading.Event(), threading.Event()
    old = threading.Thread(target=stop_old.wait, name="poller")
    old.start()
    new = threading.Thread(target=stop_new.wait, name="poller")
    try:
        with pytest.raises(LeakError, match="thread 'poller'"), LeakCheck(settle=0):
            stop_old.set()
            old.join()
            _wait_until_gone(f"/proc/self/task/{old.native_id}")
            new.start()  # glibc hands the ended thread's stack, and ident, over
        assert new.ident == old.ident or sys.platform != "linux"
    finally:
        stop_new.set()
        new.join()


def test_leak_check_forgets_threads_that_ended_outside_threading() -> None:
    # A thread that threading did not start leaves a stand-in behind once it
    # asked for current_thread(); Python 3.11 lists it after the thread ends.
    done = threading.Event()

    def foreign() -> None:
        threading.current_thread()
        done.set()

    with LeakCheck(settle=1.0):
        _thread.start_new_thread(foreign, ())
        assert done.wait(10)


def test_leak_check_leaves_the_loops_executor_out() -> None:
    async def main() -> None:
        with LeakCheck(settle=0):
            await asyncio.to_thread(int)

    asyncio.run(main())


def test_leak_check_skips_the_check_when_the_block_raises(tmp_path: Path) -> None:
    with CleanupStack() as cleanup, pytest.raises(KeyError), LeakCheck(settle=0):
        _leak_file(tmp_path, cleanup)
        raise KeyError


def test_leak_check_leaks_needs_entering() -> None:
    with pytest.raises(RuntimeError, match="entered first"):
        LeakCheck().leaks()


def test_snapshot_describes_sockets_and_resources() -> None:
    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        Handle("described") as handle,
    ):
        snapshot = ResourceSnapshot.take()
        port, fd = server.getsockname()[1], server.fileno()
    assert snapshot.fds[fd] == f"socket tcp 127.0.0.1:{port} -> - [LISTEN]"
    assert snapshot.connections[f"tcp 127.0.0.1:{port} -> -"] == "LISTEN"
    assert snapshot.resources[id(handle)] == "Handle('described')"
    assert snapshot.traced_memory is None or snapshot.traced_memory > 0


def _sockets_of_every_kind(directory: Path) -> list[socket.socket]:
    """Sockets of each family, type and state, each settled in its state."""
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    closing = socket.create_connection(server.getsockname())
    made = [server, client, server.accept()[0], closing]
    server.accept()[0].close()
    assert closing.recv(1) == b""  # the peer's FIN is in: CLOSE_WAIT
    bound = socket.socket()
    bound.bind(("127.0.0.1", 0))
    made += [socket.socket(), bound]  # in no table: never bound, never listening
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    connected_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    connected_udp.connect(udp.getsockname())
    made += [socket.socket(socket.AF_INET, socket.SOCK_DGRAM), udp, connected_udp]
    if socket.has_ipv6:
        try:
            server6 = socket.create_server(("::1", 0), family=socket.AF_INET6)
        except OSError:  # no IPv6 loopback here
            pass
        else:
            made += [server6, socket.create_connection(server6.getsockname()[:2])]
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(directory / "unix.sock"))
    listener.listen()
    unix_client = socket.socket(socket.AF_UNIX)
    unix_client.connect(str(directory / "unix.sock"))
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0runtime-tests-{os.getpid()}".encode())
    made += [listener, unix_client, listener.accept()[0], abstract]
    made += [*socket.socketpair(), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)]
    return made


@pytest.mark.skipif(sys.platform != "linux", reason="asked directly on Linux only")
def test_snapshot_asks_each_socket_what_the_tables_list(tmp_path: Path) -> None:
    """The snapshot asks each socket for what ``psutil`` reads in the tables.

    The machine's connection tables grow with every connection still in its
    TIME_WAIT; asking each socket of the process costs the same however long
    they are, and finds the same addresses and states.
    """
    made = _sockets_of_every_kind(tmp_path)
    try:
        fds = _open_fds()
        asked = _asked_connections(fds)
        listed = _listed_connections()
    finally:
        for sock in made:
            sock.close()
    assert len(asked) >= 15
    assert {fd: rest for fd, *rest in asked} == {fd: rest for fd, *rest in listed}


def test_snapshot_leaves_a_blocking_socket_blocking() -> None:
    """With a default timeout set, the snapshot reads the tables instead.

    A socket object made on a descriptor with a default timeout set would make
    it non-blocking.
    """
    with socket.create_server(("127.0.0.1", 0)) as server:
        socket.setdefaulttimeout(5)
        try:
            snapshot = ResourceSnapshot.take()
        finally:
            socket.setdefaulttimeout(None)
        assert os.get_blocking(server.fileno())
        port, fd = server.getsockname()[1], server.fileno()
    assert snapshot.fds[fd] == f"socket tcp 127.0.0.1:{port} -> - [LISTEN]"


# What LeakCheck used to miss, and what it used to report wrongly


@pytest.mark.parametrize("kind", ["file", "socket"])
def test_leak_check_sees_a_leak_that_reuses_a_closed_number(
    kind: str, tmp_path: Path
) -> None:
    """A descriptor is told from another by what it refers to, not by its number.

    The block closes a descriptor held before it, and the one it leaks gets the
    lowest free number: the same one.
    """
    if kind == "file":
        held: socket.socket | io.TextIOWrapper = open(  # noqa: SIM115
            tmp_path / "held.txt", "w", encoding="utf-8"
        )
        leaked = r"\(/.*leaked\.txt\)"
    else:
        held = socket.socket()
        leaked = r"\(socket tcp 127\.0\.0\.1:\d+ -> - \[LISTEN\]\)"
    number = held.fileno()
    with CleanupStack() as cleanup:
        check = LeakCheck(settle=0)
        with (
            pytest.raises(LeakError, match=rf"file descriptor {number} {leaked}"),
            check,
        ):
            held.close()
            reused: socket.socket | io.TextIOWrapper
            if kind == "file":
                reused = open(tmp_path / "leaked.txt", "w", encoding="utf-8")  # noqa: SIM115
            else:
                reused = socket.create_server(("127.0.0.1", 0))
            cleanup.callback(reused.close)
            assert reused.fileno() == number


@pytest.mark.skipif(sys.platform != "linux", reason="orphans are adopted on Linux")
def test_leak_check_sees_an_orphaned_grandchild() -> None:
    """A child that exits leaves its own child to whoever adopts orphans."""
    orphan_maker = ["sh", "-c", "sleep 60 </dev/null >/dev/null 2>&1 & echo $!"]
    pids: list[int] = []
    try:
        with pytest.raises(LeakError) as caught, LeakCheck(settle=0):
            made = subprocess.run(  # noqa: S603 - fixed command
                orphan_maker, capture_output=True, text=True, check=True
            )
            pids.append(int(made.stdout))
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):  # adopted: ours to reap
                os.waitpid(pid, 0)
    assert re.search(rf"child process {pids[0]}: sleep 60", str(caught.value))


def test_leak_check_names_a_child_not_waited_for() -> None:
    """A child that ended is still held until it is waited for: a zombie."""
    children: list[subprocess.Popen[bytes]] = []
    try:
        with (
            pytest.raises(LeakError, match=r"child process \d+: true \[zombie\]"),
            LeakCheck(settle=0),
        ):
            children.append(subprocess.Popen(["true"]))  # noqa: S607
            os.waitid(os.P_PID, children[0].pid, os.WEXITED | os.WNOWAIT)
    finally:
        for child in children:
            child.wait()


def _zombie_children() -> list[int]:
    me = psutil.Process()
    return [
        child.pid for child in me.children() if child.status() == psutil.STATUS_ZOMBIE
    ]


def test_leak_check_reaps_the_orphans_of_a_killed_session() -> None:
    """Grandchildren killed with their session are no leak, and no zombie stays.

    Killed together, the child dies before its own child is reaped: that
    grandchild is adopted, and only this process can reap it.
    """
    script = "sleep 60 </dev/null >/dev/null 2>&1 & echo started; wait"
    with LeakCheck():
        child = subprocess.Popen(  # noqa: S603 - fixed command
            ["sh", "-c", script],  # noqa: S607
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        with child:
            assert child.stdout is not None
            assert child.stdout.readline() == "started\n"
            os.killpg(child.pid, signal.SIGKILL)
    assert _zombie_children() == []


def test_leak_check_sees_a_leaked_asyncio_task() -> None:
    async def forever(stop: asyncio.Event) -> None:
        await stop.wait()

    async def main() -> None:
        stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        leaked = r"asyncio task 'leaky' running .*forever \(.*test_testing"
        try:
            with pytest.raises(LeakError, match=leaked), LeakCheck(settle=0):
                tasks.append(asyncio.create_task(forever(stop), name="leaky"))
        finally:
            stop.set()
            await asyncio.gather(*tasks)

    asyncio.run(main())


class _InACycle:
    """Keeps what it holds alive in a reference cycle, for the collector."""

    def __init__(self, held: object) -> None:
        self.held = held
        self.itself = self


@pytest.mark.parametrize("kind", ["file", "socket"])
def test_leak_check_names_what_only_the_collector_closed(
    kind: str, tmp_path: Path
) -> None:
    """What the garbage collector closes was leaked: its ResourceWarning names it.

    With ``tracemalloc`` tracing, where the object was made is named too.
    """
    tracemalloc.start(1)
    try:
        with pytest.raises(LeakError) as caught, LeakCheck(settle=0):
            if kind == "file":
                _InACycle(open(tmp_path / "dropped.txt", "w", encoding="utf-8"))  # noqa: SIM115
            else:
                _InACycle(socket.socket())
    finally:
        tracemalloc.stop()
    unclosed = r"dropped\.txt" if kind == "file" else r"<socket\.socket fd="
    found = re.search(
        rf"ResourceWarning at garbage collection: unclosed .*{unclosed}.*"
        r", made at (/.*test_testing\.py):(\d+)",
        str(caught.value),
    )
    assert found, str(caught.value)
    made_at = Path(found[1]).read_text(encoding="utf-8").splitlines()[int(found[2]) - 1]
    assert "_InACycle(" in made_at


def _log_to(path: Path) -> logging.FileHandler:
    handler = logging.FileHandler(path, delay=False)
    logging.getLogger("runtime.tests.app").addHandler(handler)
    return handler


def test_leak_check_allows_kinds_and_predicates(tmp_path: Path) -> None:
    """A logging handler set up for the process's life is no leak, if allowed."""
    handlers: list[logging.FileHandler] = []
    try:
        with pytest.raises(LeakError, match=r"app\.log"), LeakCheck(settle=0):
            handlers.append(_log_to(tmp_path / "app.log"))
        with LeakCheck(settle=0, ignore=[lambda leak: leak.endswith("app.log)")]):
            handlers.append(_log_to(tmp_path / "app.log"))
        with LeakCheck(settle=0, ignore=["fd"]):
            handlers.append(_log_to(tmp_path / "app.log"))
    finally:
        for handler in handlers:
            logging.getLogger("runtime.tests.app").removeHandler(handler)
            handler.close()


def test_leak_check_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match=r"ignore: unknown leak kind 'file'"):
        LeakCheck(ignore=["file"])


OPENS_ON_IMPORT = """
from pathlib import Path

LOG = Path(__file__).with_suffix(".log").open("a", encoding="utf-8")
"""
_DEFAULT_LOOPS: list[asyncio.AbstractEventLoop] = []


def _default_loop() -> asyncio.AbstractEventLoop:
    """A library's event loop, made on first use and kept for the process's life."""
    if not _DEFAULT_LOOPS:
        _DEFAULT_LOOPS.append(asyncio.new_event_loop())
    return _DEFAULT_LOOPS[0]


@pytest.mark.parametrize("first_use", ["import", "event loop"])
def test_leak_check_warms_up_before_its_snapshot(
    first_use: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a first use acquires for good is held before the warmed-up block."""
    (tmp_path / "opens_on_import.py").write_text(OPENS_ON_IMPORT, encoding="utf-8")
    monkeypatch.syspath_prepend(tmp_path)

    def use() -> None:
        if first_use == "import":
            importlib.import_module("opens_on_import")
        else:
            _default_loop()

    try:
        with pytest.raises(LeakError, match="file descriptor"), LeakCheck(settle=0):
            use()
        drop_first_use()
        with LeakCheck(settle=0, warmup=use):
            use()
    finally:
        drop_first_use()


def drop_first_use() -> None:
    """Forget the module imported and the loop made, and close what they hold."""
    module = sys.modules.pop("opens_on_import", None)
    if module is not None:
        module.LOG.close()
    while _DEFAULT_LOOPS:
        _DEFAULT_LOOPS.pop().close()


def test_live_resources_lists_only_held_instances() -> None:
    idle, done = Handle("idle"), Handle("done")
    with done:
        pass
    with Handle("held") as held, SubHandle("sub") as sub:
        found = live_resources()
    assert held in found
    assert sub in found
    assert idle not in found
    assert done not in found
    assert held not in live_resources()


# hunt_leaks


@pytest.mark.parametrize("kind", LEAKS)
def test_hunt_leaks_names_each_kind_of_leak(kind: str, tmp_path: Path) -> None:
    patterns: list[str] = []
    with CleanupStack() as cleanup:

        def scenario() -> None:
            patterns.append(LEAKS[kind](tmp_path, cleanup))

        with pytest.raises(LeakError, match="leaked on tracked run 1 of 2") as caught:
            hunt_leaks(scenario, warmups=0, runs=2, settle=0)
    assert re.search(patterns[-1], str(caught.value)), str(caught.value)


def test_hunt_leaks_names_where_leaked_memory_was_allocated() -> None:
    try:
        with pytest.raises(LeakError, match="grew memory on every tracked") as caught:
            hunt_leaks(_leak_memory, warmups=1, runs=3)
    finally:
        _HOARD.clear()
    message = str(caught.value)
    assert "test_testing.py" in message
    assert "_HOARD.append(bytearray(8192))" in message


def test_hunt_leaks_catches_objects_collected_unreleased(tmp_path: Path) -> None:
    def scenario() -> None:
        open(tmp_path / "dropped.txt", "w", encoding="utf-8")  # noqa: SIM115

    collected = r"unreleased:\n  ResourceWarning.*dropped\.txt"
    with pytest.raises(LeakError, match=collected):
        hunt_leaks(scenario, warmups=1, runs=1)


class _Unclosed:
    """Holds a file in a reference cycle: only the collector drops it."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w", encoding="utf-8")
        self.cycle = self


def test_hunt_leaks_sees_what_the_last_run_dropped(tmp_path: Path) -> None:
    # The file is collected after the last run, when the hunt collects garbage.
    collected = r"unreleased:\n  ResourceWarning.*dropped\.txt"
    with pytest.raises(LeakError, match=collected):
        hunt_leaks(lambda: _Unclosed(tmp_path / "dropped.txt"), warmups=0, runs=1)


def test_hunt_leaks_is_quiet_over_many_runs(tmp_path: Path) -> None:
    report = hunt_leaks(functools.partial(_correct_use, tmp_path), runs=10)
    assert len(report.memory_deltas) == 10
    assert report.warmups == 3
    hunt_leaks(_run_child, warmups=1, runs=2)


def test_hunt_leaks_tolerates_memory_growth_on_some_runs() -> None:
    calls = iter(range(100))

    def grows_every_other_run() -> None:
        if next(calls) % 2:
            _HOARD.append(bytearray(8192))

    try:
        report = hunt_leaks(grows_every_other_run, warmups=1, runs=4)
    finally:
        _HOARD.clear()
    assert sum(delta > 8000 for delta in report.memory_deltas) == 2


def test_hunt_leaks_propagates_the_scenario_error() -> None:
    def scenario() -> None:
        raise ValueError("scenario failed")

    with pytest.raises(ValueError, match="scenario failed"):
        hunt_leaks(scenario)
    assert not tracemalloc.is_tracing()


def test_hunt_leaks_shows_other_warnings_again() -> None:
    def scenario() -> None:
        warnings.warn("not a leak", UserWarning, stacklevel=1)

    with pytest.warns(UserWarning, match="not a leak") as shown:
        hunt_leaks(scenario, warmups=1, runs=2)
    assert len(shown) == 1


def test_hunt_leaks_keeps_tracemalloc_running_if_it_was() -> None:
    tracemalloc.start(2)
    try:
        hunt_leaks(lambda: None, warmups=0, runs=1)
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()


def test_hunt_leaks_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="runs >= 1"):
        hunt_leaks(lambda: None, runs=0)


# run_with_fd_limit


_CALLS: list[int] = []


def _leak_on_second_call(path: Path) -> None:
    _CALLS.append(1)
    stream = open(path, encoding="utf-8")  # noqa: SIM115
    if len(_CALLS) != 2:
        stream.close()
    else:
        _HOARD.append(stream)


def test_run_with_fd_limit_names_a_leaked_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "once.txt"
    path.write_text("data", encoding="utf-8")
    scenario = functools.partial(_leak_on_second_call, path)
    # The parent's check also proves that multiprocessing's fork server and
    # resource tracker, started by the first call and kept for the interpreter's
    # life, are not mistaken for leaks (when this test makes the first call).
    leaked = r"_leak_on_second_call leaked 1 .*once\.txt"
    with LeakCheck(settle=0), pytest.raises(LeakError, match=leaked):
        run_with_fd_limit(scenario, repeat=20)


def _leak_and_hide_the_error(path: Path) -> None:
    """Leak one descriptor per call, and swallow the EMFILE that ends it."""
    with contextlib.suppress(OSError):
        _HOARD.append(path.open(encoding="utf-8"))


def test_run_with_fd_limit_names_what_a_scenario_that_hides_emfile_leaked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hoarded.txt"
    path.write_text("data", encoding="utf-8")
    leaked = r"_leak_and_hide_the_error leaked \d+ .*hoarded\.txt"
    with pytest.raises(LeakError, match=leaked):
        run_with_fd_limit(functools.partial(_leak_and_hide_the_error, path), repeat=100)


class _Unpicklable(Exception):  # noqa: N818 - as a user's might be
    """An exception that pickle cannot send back from the child."""

    def __init__(self, handle: object) -> None:
        super().__init__("failed")
        self.handle = handle

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("cannot pickle this exception")


def _fail_unpicklably() -> None:
    raise _Unpicklable(threading.Lock())


def test_run_with_fd_limit_names_an_exception_it_cannot_send_back() -> None:
    with pytest.raises(RuntimeError, match=r"raised _Unpicklable: failed .*pickled"):
        run_with_fd_limit(_fail_unpicklably, repeat=1)


def _fail_like_a_test() -> None:
    pytest.fail("the scenario went wrong")


def test_run_with_fd_limit_reports_a_failure_that_is_not_an_exception() -> None:
    failed = r"_fail_like_a_test raised Failed: the scenario went wrong"
    with pytest.raises(RuntimeError, match=failed):
        run_with_fd_limit(_fail_like_a_test, repeat=1, timeout=60)


class _Unrebuildable(Exception):  # noqa: N818 - as a user's might be
    """An exception that pickles, but that pickle cannot build again."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")


def _fail_unrebuildably() -> None:
    raise _Unrebuildable("data.txt", "unreadable")


def test_run_with_fd_limit_names_an_exception_the_parent_cannot_rebuild() -> None:
    cannot = r"raised _Unrebuildable: data\.txt: unreadable .*pickled"
    with pytest.raises(RuntimeError, match=cannot):
        run_with_fd_limit(_fail_unrebuildably, repeat=1, timeout=60)


def test_run_with_fd_limit_gives_the_child_traceback_as_the_cause() -> None:
    with pytest.raises(RuntimeError) as caught:
        run_with_fd_limit(_fail_like_a_test, repeat=1, timeout=60)
    assert 'pytest.fail("the scenario went wrong")' in str(caught.value.__cause__)


def _note_the_exit(marker: Path) -> None:
    time.sleep(0.3)  # a child killed as soon as it reported never gets here
    marker.touch()


def _finalize_at_exit(marker: Path) -> None:
    if not _CALLS:
        _CALLS.append(1)
        multiprocessing.util.Finalize(None, _note_the_exit, (marker,), exitpriority=10)


def test_run_with_fd_limit_lets_a_child_that_reported_exit_by_itself(
    tmp_path: Path,
) -> None:
    """Its exit runs finalizers, joins threads, flushes output (and coverage's)."""
    marker = tmp_path / "exited"
    run_with_fd_limit(functools.partial(_finalize_at_exit, marker), repeat=1)
    assert marker.exists()


def _exit_at_once() -> None:
    os._exit(3)


def _kill_itself() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize(
    ("scenario", "how"),
    [(_exit_at_once, "exited with status 3"), (_kill_itself, "was killed by SIGKILL")],
)
def test_run_with_fd_limit_says_how_a_child_that_never_reported_ended(
    scenario: Callable[[], None], how: str
) -> None:
    """The parent sees the child end: it does not wait out the timeout."""
    ended = f"the child running {scenario.__name__} {how} before it reported"
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=ended):
        run_with_fd_limit(scenario, repeat=1, timeout=60)
    assert time.monotonic() - started < 30


def _sleep() -> None:
    time.sleep(3600)  # killed, or the test's timeout fails it


def _fork_server() -> psutil.Process:
    """The fork server that ``run_with_fd_limit`` forks its children from."""
    run_with_fd_limit(_record_nothing, repeat=0)  # started on the first call, then kept
    servers = [
        child
        for child in psutil.Process().children()
        if "multiprocessing.forkserver" in " ".join(child.cmdline())
    ]
    assert len(servers) == 1, servers
    return servers[0]


@pytest.mark.timeout(120)
def test_run_with_fd_limit_kills_a_child_still_running_at_the_timeout() -> None:
    """The child is found as the fork server's child, wherever the timeout caught it.

    Under load the child may not have reached the scenario when the 2 s are up:
    it is killed all the same, and no record it writes can be waited for.
    """
    server = _fork_server()
    assert server.children() == []  # the first call's child was reaped
    late = r"_sleep still ran after 2 s: its child is killed"
    with pytest.raises(TimeoutError, match=late):
        run_with_fd_limit(_sleep, timeout=2)
    assert server.children() == []


def _record_nothing() -> None:
    pass


_PIDS: list[int] = []


def _record_pid() -> None:
    _PIDS.append(os.getpid())
    if set(_PIDS) != {os.getpid()} or os.environ.get("FD_LIMIT_CALLER") != "here":
        msg = f"the child did not start afresh: {_PIDS}, {os.environ}"
        raise AssertionError(msg)


def test_run_with_fd_limit_starts_each_child_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each child is forked from the fork server, preloaded by ``conftest.py``.

    It starts without the parent's state and without an earlier child's (the pids
    recorded in the list, in the parent and in each child), with the environment
    of the call.
    """
    monkeypatch.setenv("FD_LIMIT_CALLER", "here")
    _PIDS.append(os.getpid())
    try:
        for _ in range(2):
            run_with_fd_limit(_record_pid, repeat=3)
    finally:
        _PIDS.clear()


class _Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.itself = self


def test_the_garbage_of_a_test_is_still_collected() -> None:
    """``conftest.py`` froze what collection made; what a test makes is not frozen.

    The collector still frees a test's reference cycles, and ``live_resources()``
    still finds the resources a test holds.
    """
    assert gc.get_freeze_count() > 0
    cycle = _Cycle()
    collected = weakref.ref(cycle)
    del cycle
    gc.collect()
    assert collected() is None
    handle = Handle("made by the test").__enter__()
    assert handle in live_resources()
    handle.__exit__(None, None, None)
    assert handle not in live_resources()


# The pytest plugin


INNER_TESTS = """
import socket

import pytest

_HOARD = []


@pytest.fixture(scope="module", autouse=True)
def _release_the_hoard():
    # The session runs in the test's process: what the tests leak on purpose is
    # closed when the module ends, not left to the garbage collector.
    yield
    for stream in _HOARD:
        stream.close()


@pytest.mark.leak_check(settle=0)
def test_marked_leak(tmp_path):
    _HOARD.append(open(tmp_path / "marked.txt", "w"))


@pytest.mark.leak_check(settle=0.0)
def test_marked_clean(tmp_path):
    with open(tmp_path / "clean.txt", "w") as stream:
        stream.write("data")


@pytest.mark.leak_check(settle=0)
def test_fixture_leak(leak_check, tmp_path):
    _HOARD.append(open(tmp_path / "fixture.txt", "w"))
    assert len(leak_check.leaks()) == 1


def test_unchecked_leak(tmp_path):
    _HOARD.append(open(tmp_path / "unchecked.txt", "w"))


@pytest.mark.leak_check(settle=0, ignore=["fd"])
def test_marked_allowance(tmp_path):
    _HOARD.append(open(tmp_path / "allowed.txt", "w"))


@pytest.mark.leak_check
def test_failing_body():
    raise ValueError("its own error")


@pytest.fixture
def server():
    with socket.create_server(("127.0.0.1", 0)) as listening:
        yield listening


@pytest.mark.leak_check
def test_fixture_resources_are_not_counted(server):
    assert server.fileno() >= 0
"""


def _inner_session(
    pytester: pytest.Pytester, *options: str
) -> tuple[dict[str, str], str]:
    """Run ``INNER_TESTS`` in a pytest session of this process.

    Return each test's outcome (with the first line of its error), and the text of
    every failure.

    In this process, not a fresh interpreter: a child importing pytest, psutil and
    the runtime from source (with no bytecode cache, as the matrix runs) spent
    more than the session's own work, and on a loaded machine two of them side by
    side outran any fixed cap.  The session is pytest's own, with its own
    configuration and plugin manager: the plugin is registered by its
    ``conftest.py``, as a project registers it.
    """
    pytester.makeconftest('pytest_plugins = ["_runtime.pytest_plugin"]\n')
    pytester.makepyfile(test_inner=INNER_TESTS)
    # The plugin's module is imported already: pytest could not rewrite its asserts
    # (it has none), and would warn that it cannot.
    plain = ("-p", "no:cacheprovider", "--assert=plain", "-W", "error")
    run = pytester.inline_run(*plain, "--strict-markers", *options)
    outcomes: dict[str, str] = {}
    failures: list[str] = []
    for report in run.getreports("pytest_runtest_logreport"):
        name = report.nodeid.partition("::")[2]
        if report.failed:
            failures.append(report.longreprtext)
            lines = report.longreprtext.splitlines()
            crash = next(line for line in lines if line.startswith("E "))
            outcomes[name] = f"FAILED {crash[1:].strip()}"
        elif report.when == "call":
            outcomes.setdefault(name, "PASSED")
    assert outcomes, run
    return outcomes, "\n".join(failures)


def test_pytest_plugin_marker_fixture_and_option(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    outcomes, leaks = _inner_session(pytester)
    all_checked, all_leaks = _inner_session(
        pytester, "--leak-check", "--leak-check-settle=0", "-k", "unchecked"
    )

    leaked = f"FAILED {LeakError.__module__}.LeakError: resources leaked:"
    assert outcomes["test_marked_leak"] == leaked
    assert outcomes["test_fixture_leak"] == leaked
    assert re.search(r"file descriptor \d+ \(/.*/marked\.txt\)", leaks)
    assert re.search(r"file descriptor \d+ \(/.*/fixture\.txt\)", leaks)
    assert outcomes["test_marked_clean"] == "PASSED"
    assert outcomes["test_unchecked_leak"] == "PASSED"
    assert outcomes["test_marked_allowance"] == "PASSED"
    assert outcomes["test_failing_body"] == "FAILED ValueError: its own error"
    assert outcomes["test_fixture_resources_are_not_counted"] == "PASSED"

    assert all_checked == {"test_unchecked_leak": leaked}
    assert re.search(r"file descriptor \d+ \(/.*/unchecked\.txt\)", all_leaks)


# The contract checker


class RawFile:
    """A hand-written context manager for an ``os.open`` descriptor: correct."""

    __slots__ = ("_fds", "_path", "_state")

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fds: list[int] = []
        self._state = "new"

    def __repr__(self) -> str:
        return f"RawFile({str(self._path)!r})"

    def __enter__(self) -> int:
        self._begin()
        try:
            return record_call(self._fds, os.open, self._path, os.O_RDONLY)
        except BaseException:
            self.close()
            raise

    def _begin(self) -> None:
        if self._state != "new":
            raise ReentryError(self)
        self._state = "open"

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_fds", None):  # None if __init__ was interrupted
            message = f"unclosed {self!r}"
            self.close()  # first: with warnings as errors the warning raises
            warnings.warn(message, ResourceWarning, stacklevel=2)

    @property
    def fd(self) -> int:
        if not self._fds:
            raise ClosedResourceError(f"{self!r} is not open")
        return self._fds[0]

    def close(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)
        if self._state != "new":
            self._state = "closed"


def _read_byte(raw: RawFile) -> bytes:
    return os.read(raw.fd, 1)


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(b"data")
    return path


def test_check_resource_passes_a_correct_class(data_file: Path) -> None:
    report = check_resource(lambda: RawFile(data_file), use=_read_byte)
    assert "interrupt sweep" in report.checks
    assert "failed system calls" in report.checks
    assert report.interrupts > 0
    # os.open, once: its audit event, after the Python code that turns the path
    # into a string, is the same call.
    assert report.failed_calls == 1


class ReleasedByExitOnly:
    """A context manager that has no ``close()``: correct but for interrupts.

    An interrupt as ``__exit__`` starts leaves the descriptor to the finalizer.
    """

    def __init__(self, path: Path) -> None:
        self._file = RawFile(path)

    def __enter__(self) -> int:
        return self._file.__enter__()

    def __exit__(self, *exc_info: object) -> None:
        self._file.close()


def test_check_resource_passes_a_class_without_close(data_file: Path) -> None:
    report = check_resource(lambda: ReleasedByExitOnly(data_file), interrupts=False)
    assert "close twice" not in report.checks
    assert report.failed_calls == 1


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[io.BufferedReader]:
    stream = open(path, "rb")  # noqa: SIM115 - an object that owns its descriptor
    try:
        yield stream
    finally:
        stream.close()


class ContextlibPair:
    """A correct class built of contextlib's parts.

    An ``ExitStack`` enters a ``@contextmanager`` generator whose ``yield`` is in
    a ``try``/``finally``, and a socket in ``contextlib.closing``.  What an
    interrupt drops half-way is an object that its own finalizer releases: the
    generator, the file, the socket.
    """

    __slots__ = ("_path", "_stack", "_state")

    def __init__(self, path: Path) -> None:
        self._path = path
        self._stack = contextlib.ExitStack()
        self._state = "new"

    def __repr__(self) -> str:
        return f"ContextlibPair({str(self._path)!r})"

    def __enter__(self) -> io.BufferedReader:
        if self._state != "new":
            raise ReentryError(self)
        self._state = "open"
        try:
            stream = self._stack.enter_context(_opened(self._path))
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._stack.enter_context(contextlib.closing(unix))
        except BaseException:
            self.close()
            raise
        return stream

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        suppressed = self._stack.__exit__(exc_type, exc, traceback)
        self._state = "closed"
        return bool(suppressed)

    def __del__(self) -> None:
        if getattr(self, "_state", None) == "open":
            self.close()
            warnings.warn(f"unclosed {self!r}", ResourceWarning, stacklevel=2)

    def close(self) -> None:
        self._stack.close()
        if self._state != "new":
            self._state = "closed"


class ReraisesTheBlocksError(RawFile):
    """Treats interrupts apart and raises the block's exception itself: correct.

    What counts is that the very object comes out, not how.
    """

    __slots__ = ()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
        if exc is not None and not isinstance(exc, Exception):
            raise exc


@pytest.mark.parametrize("correct", [ContextlibPair, ReraisesTheBlocksError])
def test_check_resource_passes_correct_classes(
    data_file: Path,
    correct: Callable[[Path], contextlib.AbstractContextManager[object]],
) -> None:
    report = check_resource(lambda: correct(data_file))
    assert "exception groups in the body" in report.checks
    assert report.interrupts > 0


@pytest.mark.parametrize(
    "factory",
    [
        _opened,
        lambda path: contextlib.closing(RawFile(path)),
        lambda path: contextlib.ExitStack(),
    ],
    ids=["contextmanager", "closing", "ExitStack"],
)
def test_contextlib_objects_keep_a_looser_contract(
    data_file: Path,
    factory: Callable[[Path], contextlib.AbstractContextManager[object]],
) -> None:
    # Their blocks keep it (each exception comes out unchanged); but they are
    # not single-use with ReentryError, and say nothing when collected held.
    with pytest.raises(ContractError, match=r"^a second with after the first raised"):
        check_resource(
            lambda: factory(data_file), interrupts=False, failed_calls=False, settle=0
        )


def test_check_resource_puts_back_the_tracer_it_found(data_file: Path) -> None:
    def tracer(frame: object, event: str, arg: object) -> None:
        """A stand-in for coverage's tracer or a debugger's."""

    previous = sys.gettrace(), sys.getprofile()
    sys.settrace(tracer)
    sys.setprofile(tracer)
    try:
        check_resource(lambda: RawFile(data_file), use=_read_byte)
        assert (sys.gettrace(), sys.getprofile()) == (tracer, tracer)
    finally:
        sys.settrace(previous[0])
        sys.setprofile(previous[1])


class ForgetsBeforeReleasing(RawFile):
    """Forgets its descriptor, then makes a Python call before closing it."""

    __slots__ = ()

    def close(self) -> None:
        fds, self._fds = self._fds, []
        _log("closing")
        if fds:
            os.close(fds[0])
        self._state = "closed"


def _log(message: str) -> None:
    del message


def test_interrupt_sweep_finds_a_window_in_the_release(data_file: Path) -> None:
    with pytest.raises(ContractError, match=r"KeyboardInterrupt.*_log.*left held"):
        check_resource(
            lambda: ForgetsBeforeReleasing(data_file), failed_calls=False, settle=0
        )


class ClosesBadlyOutsideTheBlock(ForgetsBeforeReleasing):
    """Releases correctly at the end of a block; only ``close()`` has the window."""

    __slots__ = ()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        RawFile.close(self)


def test_interrupt_sweep_also_attacks_close(data_file: Path) -> None:
    with pytest.raises(ContractError, match=r"KeyboardInterrupt.* in close left held"):
        check_resource(
            lambda: ClosesBadlyOutsideTheBlock(data_file), failed_calls=False, settle=0
        )


class ClosesOnce(RawFile):
    """Raises when closed a second time, where closing must be harmless."""

    __slots__ = ()

    def close(self) -> None:
        if self._state == "closed":
            raise RuntimeError("already closed")
        super().close()


def test_a_second_close_must_be_harmless(data_file: Path) -> None:
    with LeakCheck(), pytest.raises(ContractError, match=r"close\(\) after the block"):
        check_resource(lambda: ClosesOnce(data_file), settle=0)


class StoresLate(RawFile):
    """Keeps the descriptor in a local variable for a call before recording it."""

    __slots__ = ()

    def __enter__(self) -> int:
        self._begin()
        fd = os.open(self._path, os.O_RDONLY)
        _log("opened")
        self._fds.append(fd)
        return fd


def test_interrupt_sweep_finds_a_window_in_the_acquisition(data_file: Path) -> None:
    with pytest.raises(ContractError, match=r"KeyboardInterrupt.* in enter left held"):
        check_resource(lambda: StoresLate(data_file), failed_calls=False, settle=0)


class DefersItsWindow(RawFile):
    """Keeps the descriptor in a local variable, inside a deferral, as it must."""

    __slots__ = ()

    def __enter__(self) -> int:
        self._begin()
        with deferred_interrupts():
            fd = os.open(self._path, os.O_RDONLY)
            _log("opened")
            self._fds.append(fd)
        return fd


def test_interrupt_sweep_holds_back_where_sigint_is_ignored(data_file: Path) -> None:
    # A background job inherits SIGINT ignored, and a deferral then does nothing;
    # the sweep gives the signal Python's handler, so that it defers as it would.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        report = check_resource(
            lambda: DefersItsWindow(data_file), failed_calls=False, settle=0
        )
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert report.interrupts > 0


def test_interrupt_sweep_needs_the_main_thread(data_file: Path) -> None:
    errors: list[BaseException] = []

    def check() -> None:
        try:
            check_resource(lambda: RawFile(data_file), failed_calls=False)
        except RuntimeError as error:
            errors.append(error)

    thread = threading.Thread(target=check)
    thread.start()
    thread.join()
    assert [str(error) for error in errors] == [
        "the interrupt sweep must run in the main thread (interrupts=False)"
    ]


class LeaksOnFailedOpen(RawFile):
    """Opens two descriptors and loses the first if the second fails."""

    __slots__ = ()

    def __enter__(self) -> int:
        self._begin()
        first = os.open(self._path, os.O_RDONLY)
        second = os.open(self._path, os.O_RDONLY)
        self._fds += [first, second]
        return first

    def close(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)
        self._state = "closed"


def test_failed_system_calls_find_a_leak_on_the_error_path(data_file: Path) -> None:
    with pytest.raises(ContractError, match=r"injected failure of open.*left held"):
        check_resource(lambda: LeaksOnFailedOpen(data_file), interrupts=False, settle=0)


class Swallows(RawFile):
    """Returns true from ``__exit__``."""

    __slots__ = ()

    def __exit__(  # type: ignore[override]
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self.close()
        return True


class ReentersSilently(RawFile):
    """Lets a second ``with`` open a second descriptor."""

    __slots__ = ()

    def __enter__(self) -> int:
        self._state = "new"
        return super().__enter__()


class Silent(RawFile):
    """Releases at collection, but says nothing."""

    __slots__ = ()

    def __del__(self) -> None:
        self.close()


class WarnsFirst(RawFile):
    """Warns, then releases, at collection: with warnings as errors it leaks."""

    __slots__ = ()

    def __del__(self) -> None:
        if getattr(self, "_fds", None):
            warnings.warn(f"unclosed {self!r}", ResourceWarning, stacklevel=2)
            self.close()


class Lingers(RawFile):
    """Does not release on exit: only ``close()`` does."""

    __slots__ = ()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        pass


class SwallowsOSError(RawFile):
    """Swallows an ``OSError`` of the block, as if it were the release's own."""

    __slots__ = ()

    def __exit__(  # type: ignore[override]
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self.close()
        return isinstance(exc, OSError)


class SwallowsBrokenPipe(RawFile):
    """Swallows ``BrokenPipeError`` alone: a peer that went away is no error."""

    __slots__ = ()

    def __exit__(  # type: ignore[override]
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self.close()
        return exc_type is BrokenPipeError


class SwallowsInterrupt(RawFile):
    """Swallows ``KeyboardInterrupt``, to stop quietly on Ctrl-C."""

    __slots__ = ()

    def __exit__(  # type: ignore[override]
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self.close()
        return isinstance(exc, KeyboardInterrupt)


class SwallowsSystemExit(RawFile):
    """Swallows ``SystemExit``, as a server's loop that must never end might."""

    __slots__ = ()

    def __exit__(  # type: ignore[override]
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self.close()
        return isinstance(exc, SystemExit)


class SwallowsGroups(RawFile):
    """Swallows what ``except* ConnectionError`` would handle, and a whole group."""

    __slots__ = ()

    def __exit__(  # type: ignore[override]
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self.close()
        if isinstance(exc, ExceptionGroup):
            return exc.split(ConnectionError)[0] is not None
        return False


class ReplacesTheError(RawFile):
    """Raises an error of its own in place of the block's (with it as the cause)."""

    __slots__ = ()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
        if exc is not None:
            raise RuntimeError("the block failed") from exc


class CopiesTheError(RawFile):
    """Raises a copy of the block's ``OSError``: equal, but not the same object."""

    __slots__ = ()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
        if type(exc) is OSError:
            raise OSError(*exc.args)


_SWALLOWED = r"the body's exception was swallowed: {} was raised in the block and "
_SWALLOWED += r"the code after the block ran \(an exception in the body must "
_SWALLOWED += r"propagate unchanged\)"
_REPLACED = r"the body's exception was replaced: {} was raised in the block and {} "
_REPLACED += r"came out of it \(an exception in the body must propagate unchanged\)"
_OS_ERROR = r"OSError\(5, 'raised in the body'\)"


@pytest.mark.parametrize(
    ("broken", "promise"),
    [
        (Swallows, _SWALLOWED.format(r"_BodyError\('raised in the body'\)")),
        (SwallowsOSError, _SWALLOWED.format(_OS_ERROR)),
        (
            SwallowsBrokenPipe,
            _SWALLOWED.format(r"BrokenPipeError\(32, 'raised in the body'\)"),
        ),
        (
            SwallowsInterrupt,
            _SWALLOWED.format(r"KeyboardInterrupt\('raised in the body'\)"),
        ),
        (SwallowsSystemExit, _SWALLOWED.format(r"SystemExit\('raised in the body'\)")),
        (
            SwallowsGroups,
            _SWALLOWED.format(
                r"ExceptionGroup\('raised in the body', \[ConnectionResetError\(104, "
                r"'raised in the body'\), _BodyError\('raised in the body'\)\]\)"
            ),
        ),
        (
            ReplacesTheError,
            _REPLACED.format(
                r"_BodyError\('raised in the body'\)",
                r"RuntimeError\('the block failed'\)",
            ),
        ),
        (CopiesTheError, _REPLACED.format(_OS_ERROR, _OS_ERROR)),
        (ReentersSilently, "a second with after the first raised nothing, not Reentry"),
        (Silent, "an object collected while held emitted no ResourceWarning"),
        (
            WarnsFirst,
            "an object collected while held, with ResourceWarning an error left "
            "held: file descriptor",
        ),
        (Lingers, "a plain block left held: file descriptor"),
    ],
)
def test_check_resource_names_the_broken_promise(
    data_file: Path, broken: type[RawFile], promise: str
) -> None:
    with pytest.raises(ContractError, match=f"^{promise}") as caught:
        check_resource(
            lambda: broken(data_file), interrupts=False, failed_calls=False, settle=0
        )
    # The class's own exception is the cause, so that its traceback shows.
    if broken is ReplacesTheError:
        assert isinstance(caught.value.__cause__, RuntimeError)
    if broken is CopiesTheError:
        assert type(caught.value.__cause__) is OSError


class LeaksOnFailedSocket(LeaksOnFailedOpen):
    """Opens a descriptor, then a socket, and loses the first if ``socket()`` fails."""

    __slots__ = ()

    def __enter__(self) -> int:
        self._begin()
        first = os.open(self._path, os.O_RDONLY)
        second = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).detach()
        self._fds += [first, second]
        return first


class LeaksOnFailedFlock(LeaksOnFailedOpen):
    """Locks the file it opened, and loses it if ``flock()`` fails."""

    __slots__ = ()

    def __enter__(self) -> int:
        self._begin()
        fd = os.open(self._path, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_SH)
        self._fds.append(fd)
        return fd


class LeaksInInit(LeaksOnFailedOpen):
    """Acquires in ``__init__``, as ``open()`` does, losing the first descriptor."""

    __slots__ = ()

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        first = os.open(path, os.O_RDONLY)
        second = os.open(path, os.O_RDONLY)
        self._fds += [first, second]
        self._state = "made"

    def __enter__(self) -> int:
        if self._state != "made":
            raise ReentryError(self)
        self._state = "open"
        return self.fd


@pytest.mark.parametrize(
    ("leaky", "failed"),
    [
        (LeaksOnFailedSocket, "socket.__new__"),
        (LeaksOnFailedFlock, "flock"),
        (LeaksInInit, "open"),
    ],
)
def test_failed_system_calls_reach_types_fcntl_and_the_factory(
    data_file: Path, leaky: type[RawFile], failed: str
) -> None:
    with pytest.raises(ContractError, match=rf"failure of {failed}.* left held"):
        check_resource(lambda: leaky(data_file), interrupts=False, settle=0)


class ForgetsOnError(RawFile):
    """After a block that raised, forgets its descriptor before a call, then closes."""

    __slots__ = ()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        fds, self._fds = self._fds, []
        _log("discarding")
        for fd in fds:
            os.close(fd)
        self._state = "closed"


def test_interrupt_sweep_attacks_the_exit_of_a_block_that_raised(
    data_file: Path,
) -> None:
    with pytest.raises(ContractError, match=r"_log.* in exit of a block that raised"):
        check_resource(lambda: ForgetsOnError(data_file), failed_calls=False, settle=0)


_QUICK_CHILD: tuple[str, list[str], dict[str, str]] = (
    "/bin/sh",
    ["sh", "-c", "exit 0"],
    {},
)
"""A child that ends at once.  Its environment is empty: ``os.environ`` would be
converted in Python code, which the sweep traces at every point (the sweep test
took 2.6 s in the suite with it, 0.3 s without)."""


class ForgetsBeforeWaiting:
    """Starts a child; ``close()`` forgets its pid, then waits for it to end."""

    spawned: ClassVar[list[int]] = []

    def __init__(self) -> None:
        self._pids: list[int] = []
        self._state = "new"

    def __enter__(self) -> ForgetsBeforeWaiting:
        if self._state != "new":
            raise ReentryError(self)
        self._state = "open"
        try:
            record_call(self._pids, os.posix_spawn, *_QUICK_CHILD)
        except BaseException:
            self.close()
            raise
        ForgetsBeforeWaiting.spawned += self._pids
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_pids", None):
            self.close()
            warnings.warn(
                "unclosed ForgetsBeforeWaiting", ResourceWarning, stacklevel=2
            )

    def close(self) -> None:
        while self._pids:
            pid = self._pids[-1]
            del self._pids[-1]  # no call, so no signal check, between here and the
            os.waitpid(pid, 0)  # wait: only a Ctrl-C during the wait leaves a zombie
        self._state = "closed"


def test_interrupt_sweep_interrupts_a_call_that_waits() -> None:
    try:
        with pytest.raises(ContractError, match=r"during waitpid.*child process"):
            check_resource(ForgetsBeforeWaiting, failed_calls=False, settle=0)
    finally:
        for pid in ForgetsBeforeWaiting.spawned:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


class KillsOnlyTheShell:
    """Starts a shell with a job in the background, and kills only the shell."""

    orphans: ClassVar[list[int]] = []

    def __init__(self) -> None:
        self._shell: subprocess.Popen[str] | None = None

    @property
    def closed(self) -> bool:
        return self._shell is None

    def __enter__(self) -> KillsOnlyTheShell:
        background = "sleep 60 </dev/null >/dev/null 2>&1 & echo $!; wait"
        shell = self._shell = subprocess.Popen(  # noqa: S603 - fixed command
            ["sh", "-c", background],  # noqa: S607
            stdout=subprocess.PIPE,
            text=True,
        )
        assert shell.stdout is not None
        KillsOnlyTheShell.orphans.append(int(shell.stdout.readline()))
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        shell, self._shell = self._shell, None
        if shell is not None:
            shell.kill()
            shell.wait()
            assert shell.stdout is not None
            shell.stdout.close()


@pytest.mark.skipif(sys.platform != "linux", reason="orphans are adopted on Linux")
def test_check_resource_sees_the_orphan_of_a_child_it_killed() -> None:
    # The orphan may be killed before it has run sleep: it is named by its pid.
    try:
        with pytest.raises(ContractError) as caught:
            check_resource(
                KillsOnlyTheShell, interrupts=False, failed_calls=False, settle=0
            )
    finally:
        for pid in KillsOnlyTheShell.orphans:
            os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):  # adopted: ours to reap
                os.waitpid(pid, 0)
    orphan = KillsOnlyTheShell.orphans[0]
    assert f"a plain block left held: child process {orphan}: " in str(caught.value)


class ClosesAnyNumber(RawFile):
    """Remembers its descriptor's number after closing it, and closes it again."""

    __slots__ = ("_number",)

    def __enter__(self) -> int:
        self._number = super().__enter__()
        return self._number

    def close(self) -> None:
        number = getattr(self, "_number", None)
        if number is not None:
            with contextlib.suppress(OSError):
                os.close(number)
        self._fds = []
        self._state = "closed"


class ClosesItsSecondAgain(RawFile):
    """Holds two descriptors, and closes the second one's number again."""

    __slots__ = ("_second",)

    def __enter__(self) -> int:
        first = super().__enter__()
        self._second = record_call(self._fds, os.open, self._path, os.O_RDONLY)
        return first

    def close(self) -> None:
        second = getattr(self, "_second", None)
        if not self._fds and second is not None:
            with contextlib.suppress(OSError):
                os.close(second)
        super().close()


@pytest.mark.parametrize("broken", [ClosesAnyNumber, ClosesItsSecondAgain])
def test_a_second_close_must_not_close_a_reused_number(
    data_file: Path, broken: type[RawFile]
) -> None:
    with pytest.raises(ContractError, match=r"closed file descriptor .* no longer"):
        check_resource(
            lambda: broken(data_file),
            interrupts=False,
            failed_calls=False,
            settle=0,
        )


class StartsAThreadOutsideThreading(RawFile):
    """Starts a thread with ``_thread`` and never stops it."""

    __slots__ = ()
    stop: ClassVar[threading.Event]

    def __enter__(self) -> int:
        fd = super().__enter__()
        running = threading.Event()
        _thread.start_new_thread(self._run, (running,))
        running.wait(10)  # seen once it runs Python code
        return fd

    def _run(self, running: threading.Event) -> None:
        running.set()
        self.stop.wait()


def _leave_a_stand_in() -> None:
    """Run a thread outside threading that asks for current_thread(), and wait
    until its OS thread has ended: Python 3.11 keeps its stand-in, whose ident
    the next new thread is likely to get."""
    done = threading.Event()
    native: list[int] = []

    def foreign() -> None:
        native.append(threading.current_thread().native_id or 0)
        done.set()

    _thread.start_new_thread(foreign, ())
    assert done.wait(10)
    _wait_until_gone(f"/proc/self/task/{native[0]}")


def test_check_resource_sees_a_thread_outside_threading(data_file: Path) -> None:
    _leave_a_stand_in()  # which hid the new thread at its ident
    StartsAThreadOutsideThreading.stop = threading.Event()
    try:
        outside = r"thread \d+ outside threading \(running "
        with pytest.raises(ContractError, match=outside):
            check_resource(
                lambda: StartsAThreadOutsideThreading(data_file),
                interrupts=False,
                failed_calls=False,
                settle=0,
            )
    finally:
        StartsAThreadOutsideThreading.stop.set()


class AsyncHandle:
    """An async resource whose ``aclose()`` awaits before it releases."""

    live: ClassVar[set[int]] = set()

    def __init__(self) -> None:
        self.closed = False
        self._entered = False

    async def __aenter__(self) -> AsyncHandle:
        if self._entered:
            raise ReentryError(self)
        self._entered = True
        AsyncHandle.live.add(id(self))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __del__(self) -> None:
        if id(self) in AsyncHandle.live:
            AsyncHandle.live.discard(id(self))
            warnings.warn("unclosed AsyncHandle", ResourceWarning, stacklevel=2)

    async def aclose(self) -> None:
        if id(self) in AsyncHandle.live:
            await asyncio.sleep(0)
            AsyncHandle.live.discard(id(self))
        self.closed = True


def test_cancellation_sweep_finds_a_close_that_a_cancel_stops() -> None:
    with pytest.raises(ContractError, match=r"a cancelled aclose\(\) did not close"):
        asyncio.run(
            check_async_resource(
                AsyncHandle, released=lambda: not AsyncHandle.live, settle=0
            )
        )
    assert not AsyncHandle.live  # a failed check closes what it made


class AsyncTicker:
    """An async resource whose ``aclose()`` forgets the task its block started."""

    def __init__(self) -> None:
        self.closed = False
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncTicker:
        if self._task is not None:
            raise ReentryError(self)
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _tick(self) -> None:
        await asyncio.sleep(3600)

    async def aclose(self) -> None:
        self.closed = True


class AsyncClosesOnce(AsyncHandle):
    """Raises when closed a second time, where closing must be harmless."""

    async def aclose(self) -> None:
        if self.closed:
            raise RuntimeError("already closed")
        await super().aclose()


def test_a_second_aclose_must_be_harmless() -> None:
    async def main() -> None:
        with pytest.raises(ContractError, match=r"aclose\(\) after the block raised"):
            await check_async_resource(AsyncClosesOnce, cancellations=False, settle=0)

    asyncio.run(main())
    assert not AsyncHandle.live


class AsyncOpensTwo:
    """Opens a descriptor after each of two handshakes; ``__aexit__`` releases.

    Correct, with neither ``closed`` nor ``aclose()``.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fds: list[int] = []
        self._entered = False

    async def __aenter__(self) -> AsyncOpensTwo:
        if self._entered:
            raise ReentryError(self)
        self._entered = True
        try:
            for _ in range(2):
                await asyncio.sleep(0)  # a handshake
                record_call(self._fds, os.open, self._path, os.O_RDONLY)
        except BaseException:
            self._close_now()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._close_now()

    def __del__(self) -> None:
        if getattr(self, "_fds", None):
            self._close_now()
            warnings.warn("unclosed AsyncOpensTwo", ResourceWarning, stacklevel=2)

    def _close_now(self) -> None:
        while self._fds:
            os.close(self._fds.pop())


class AsyncLosesTheFirst(AsyncOpensTwo):
    """Keeps what it opens in a local list until both handshakes are done."""

    async def __aenter__(self) -> AsyncLosesTheFirst:
        if self._entered:
            raise ReentryError(self)
        self._entered = True
        opened = []
        for _ in range(2):
            await asyncio.sleep(0)  # a handshake
            opened.append(os.open(self._path, os.O_RDONLY))
        self._fds = opened
        return self


def test_async_check_needs_neither_closed_nor_aclose(data_file: Path) -> None:
    report = asyncio.run(check_async_resource(lambda: AsyncOpensTwo(data_file)))
    assert "cancellation sweep" in report.checks


def test_cancellation_sweep_cancels_each_pass_through_an_await(
    data_file: Path,
) -> None:
    # Both handshakes are the same await: the second one's cancellation loses
    # the descriptor of the first.
    with pytest.raises(ContractError, match=r"block cancelled .* left held: file"):
        asyncio.run(
            check_async_resource(lambda: AsyncLosesTheFirst(data_file), settle=0)
        )


def test_async_check_finds_a_task_that_outlives_aclose() -> None:
    async def main() -> None:
        left = r"plain block left running: task .*_tick"
        with pytest.raises(ContractError, match=left):
            await check_async_resource(AsyncTicker, cancellations=False)

    asyncio.run(main())  # which cancels the task left behind


class AsyncSwallowsCancellation(AsyncOpensTwo):
    """Swallows ``CancelledError``: the code after its block runs, cancelled."""

    async def __aexit__(self, *exc_info: object) -> bool:  # type: ignore[override]
        self._close_now()
        return isinstance(exc_info[1], asyncio.CancelledError)


class AsyncSwallowsOSError(AsyncOpensTwo):
    """Swallows an ``OSError`` of the block."""

    async def __aexit__(self, *exc_info: object) -> bool:  # type: ignore[override]
        self._close_now()
        return isinstance(exc_info[1], OSError)


class AsyncReplacesCancellation(AsyncOpensTwo):
    """Turns a cancellation into an error of its own."""

    async def __aexit__(self, *exc_info: object) -> None:
        self._close_now()
        if isinstance(exc_info[1], asyncio.CancelledError):
            raise ConnectionAbortedError("cancelled")


class AsyncLosesItsCancellation(AsyncOpensTwo):
    """``aclose()`` waits for a goodbye and returns, cancelled or not.

    It still releases everything: only the cancellation is lost.
    """

    closed = False

    async def __aexit__(self, *exc_info: object) -> None:
        self._close_now()
        self.closed = True

    async def aclose(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)  # a goodbye to the peer
        self._close_now()
        self.closed = True


class AsyncRetriesItsHandshake(AsyncOpensTwo):
    """Takes a cancelled handshake for a lost packet, and goes on."""

    async def __aenter__(self) -> AsyncRetriesItsHandshake:
        if self._entered:
            raise ReentryError(self)
        self._entered = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)  # a handshake
        record_call(self._fds, os.open, self._path, os.O_RDONLY)
        return self


_CANCEL_SWALLOWED = (
    "the body's cancellation was swallowed: CancelledError from {} was raised in "
    "the block and the code after the block ran (a cancellation must propagate "
    "unchanged)"
)


@pytest.mark.parametrize(
    ("broken", "promise"),
    [
        (
            AsyncSwallowsCancellation,
            re.escape(_CANCEL_SWALLOWED.format("task.cancel()")),
        ),
        (AsyncSwallowsOSError, _SWALLOWED.format(_OS_ERROR)),
        (
            AsyncReplacesCancellation,
            "the body's cancellation was replaced: CancelledError from "
            r"task\.cancel\(\) was raised in the block and "
            r"ConnectionAbortedError\('cancelled'\) came out of it \(a cancellation "
            r"must propagate unchanged\)",
        ),
        (
            AsyncRetriesItsHandshake,
            r"a block cancelled at suspension point 0 returned normally: its "
            r"cancellation was swallowed \(a cancelled task must raise "
            r"CancelledError\)",
        ),
        (
            AsyncLosesItsCancellation,
            r"aclose\(\) cancelled at suspension point 0 returned normally: its "
            r"cancellation was swallowed \(a cancelled task must raise "
            r"CancelledError\)",
        ),
    ],
)
def test_check_async_resource_names_the_broken_promise(
    data_file: Path, broken: type[AsyncOpensTwo], promise: str
) -> None:
    with LeakCheck(), pytest.raises(ContractError, match=f"^{promise}") as caught:
        asyncio.run(check_async_resource(lambda: broken(data_file), settle=0))
    if broken is AsyncReplacesCancellation:
        assert isinstance(caught.value.__cause__, ConnectionAbortedError)


def test_a_cancellation_swallowed_under_a_timeout_is_named(data_file: Path) -> None:
    # asyncio.timeout() turns the cancellation into TimeoutError only if it
    # comes out of the block: swallowed, the code after the block runs.
    async def main() -> None:
        factory = functools.partial(AsyncSwallowsCancellation, data_file)
        await _check_cancelled_block(factory, _Checker(None, 0), timeout=True)

    expired = _CANCEL_SWALLOWED.format("an asyncio.timeout() that expired")
    with LeakCheck(), pytest.raises(ContractError, match=f"^{re.escape(expired)}"):
        asyncio.run(main())


def test_use_after_close_must_raise_closed_resource_error(data_file: Path) -> None:
    def peek(raw: RawFile) -> object:
        return raw._fds

    with pytest.raises(ContractError, match="use after close raised nothing"):
        check_resource(lambda: RawFile(data_file), use=peek, interrupts=False)
