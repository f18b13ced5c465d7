"""Fault injection: a ``KeyboardInterrupt`` or a failed system call at every point.

A ``_Sweep`` counts the points where the code under test could be interrupted
(through ``sys.settrace``) or where it calls into the operating system (through
``sys.setprofile`` and an audit hook), and injects one fault at the n-th; the
contract checkers (``conformance``, ``async_conformance``) run one sweep per
point.  The toolkit's own frames are never counted.
"""

from __future__ import annotations

import contextlib
import dis
import errno
import functools
import io
import socket
import sys
import sysconfig
import threading
import warnings
from typing import TYPE_CHECKING, Any

from ._resource import deferred_interrupts, record_call
from .snapshot import _TOOLKIT_FILES

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import FrameType


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


class _InjectedError(OSError):
    """The ``OSError`` that the checker injects in place of a system call."""


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
        if filename in _TOOLKIT_FILES or self.fired is not None:
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
        if frame.f_code.co_filename in _TOOLKIT_FILES:
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
