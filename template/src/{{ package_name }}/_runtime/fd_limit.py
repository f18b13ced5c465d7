"""``run_with_fd_limit``: run a scenario many times under a low descriptor limit.

The scenario runs in a child forked from multiprocessing's fork server, whose
``RLIMIT_NOFILE`` is lowered first: a leak ends in ``EMFILE`` or in a descriptor
count that grew.  The child reports back through a pipe; the parent names how a
child that never reported ended, and kills one that outlives the timeout.
"""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.connection
import os
import pickle
import resource
import signal
import traceback
from typing import TYPE_CHECKING

from ._process import _describe_fd, _fd_is_open
from .leak_check import LeakError, _name

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess


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
