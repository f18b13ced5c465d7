"""How a failed release is reported, and which signals a release holds back.

Every context manager built on this runtime follows one rule when its release step
raises.  The exception raised by the block (the *primary* one) keeps propagating
unchanged, and the release failure is attached to it as a note
(``BaseException.add_note``).  Without a primary exception the failure is raised
itself.  The one exception to the rule is an interrupt, an exception that is not an
``Exception`` (``KeyboardInterrupt``, ``SystemExit``, ``asyncio.CancelledError``),
raised by a release while the block raised an ordinary ``Exception``: the interrupt
wins, with the block's exception as its ``__context__``.

Steps that must not be separated run with every signal that has a Python
handler held back (``InterruptDeferral`` in ``_resource``): the functions at the
end of this module find those signals, swap and put back their handlers, each
swap in one C call.
"""

from __future__ import annotations

import collections
import itertools
import signal
import sys
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import FrameType

    Handler = Callable[[int, FrameType | None], object]

__all__ = [
    "call_each",
    "cleanup_outcome",
    "put_back_handlers",
    "raise_signals",
    "raise_unless_noted",
    "replace_python_handlers",
]

T = TypeVar("T")


def _is_interrupt(error: BaseException) -> bool:
    return not isinstance(error, Exception)


def cleanup_outcome(
    primary: BaseException | None,
    failures: list[tuple[object, BaseException]],
    *,
    group: bool,
) -> BaseException | None:
    """Return what a finished cleanup must raise, or None to let *primary* go on.

    *primary* is the exception raised by the block (None if it succeeded or a
    member suppressed it), *failures* the cleanups that raised, with what they were
    cleaning up.  With *group*, cleanup errors are always raised as an
    ``ExceptionGroup``; without it, a single one is raised as it is.
    """
    if not failures:
        return None
    interrupts = [error for _, error in failures if _is_interrupt(error)]
    if primary is not None and (not interrupts or _is_interrupt(primary)):
        _add_notes(primary, failures)
        return None
    if interrupts:
        interrupt = interrupts[0]
        _add_notes(interrupt, [f for f in failures if f[1] is not interrupt])
        if primary is not None and interrupt.__context__ is None:
            interrupt.__context__ = primary
        return interrupt
    errors = [error for _, error in failures if isinstance(error, Exception)]
    if len(errors) == 1 and not group:
        return errors[0]
    plural = "s" if len(errors) > 1 else ""
    return ExceptionGroup(f"{len(errors)} cleanup{plural} failed", errors)


def raise_unless_noted(
    error: BaseException, what: object, primary: BaseException | None
) -> None:
    """Raise *error*, the failed release of *what*, unless it became a note.

    Call it from the ``except`` clause that caught *error*.  It returns only when
    *error* was attached to *primary* as a note; the caller then lets *primary*
    propagate.
    """
    if error is primary or cleanup_outcome(primary, [(what, error)], group=False):
        raise error


def call_each(function: Callable[[T], object], items: Iterable[T]) -> None:
    """Call *function* on every item, even if some calls fail; then raise what failed.

    What an ``ExitStack`` of callbacks does, without its cost, and by the rule
    above: an interrupt among the failures is raised, the others attached to it
    as notes; a single ordinary failure is raised itself, and several together
    as an ``ExceptionGroup``.
    """
    failures: list[tuple[object, BaseException]] = []
    for item in items:
        try:
            function(item)
        except BaseException as error:  # noqa: BLE001 - raised below
            failures.append((item, error))
    if failures and (raising := cleanup_outcome(None, failures, group=False)):
        raise raising


def _add_notes(
    error: BaseException, failures: list[tuple[object, BaseException]]
) -> None:
    for what, failure in failures:
        error.add_note(
            f"while cleaning up {what!r}, this also failed: "
            f"{type(failure).__qualname__}: {failure}"
        )


# Signals held back


_SIGNALS = tuple(sorted(map(int, signal.valid_signals())))
"""Plain numbers: ``getsignal`` takes an ``int`` faster than a ``Signals``."""
_RAW_SIGNAL_FUNCTIONS = sys.version_info < (3, 15)
"""Whether handlers are swapped with ``_signal``'s functions.

``signal.signal`` and ``signal.getsignal`` are wrappers, in Python, of the C
functions of the private ``_signal`` module, which convert handlers to and from
enums (9 us a pair).  Every Python from 3.11 to 3.14 has them, with the same
signatures and results (``tests/test_runtime_internals.py`` checks it on each);
a later Python gets the public functions until it is checked too."""

if _RAW_SIGNAL_FUNCTIONS:
    import _signal  # type: ignore[import-not-found]  # no stub: the C functions

    _get_handler: Callable[[int], object] = _signal.getsignal
    _set_handler: Callable[[int, Handler], Handler] = _signal.signal
    _raise_signal: Callable[[int], None] = _signal.raise_signal  # the C functions
else:  # a Python this runtime was not checked on
    _get_handler = signal.getsignal
    _set_handler = signal.signal  # type: ignore[assignment]
    _raise_signal = signal.raise_signal


def replace_python_handlers(handler: Handler) -> dict[int, Handler]:
    """Put *handler* in place of every Python signal handler; return those replaced.

    A signal has a Python handler when ``signal.signal`` gave it a function:
    ``SIGINT`` (Python's own, raising ``KeyboardInterrupt``), and whatever a
    program added (``SIGTERM`` turned into ``SystemExit``, a ``SIGALRM`` timer,
    asyncio's handlers).  A signal whose handler is the default or ignored raises
    nothing in Python code, and is left as it is.  The lookup (about 1.5 us for
    the 60-odd signals of Linux) runs Python code where a signal may still be
    handled, before anything is replaced; the replacement is one C call, with no
    check for signals until it has returned: a signal landing then meets
    *handler* already.
    """
    handled = tuple(
        itertools.compress(_SIGNALS, map(callable, map(_get_handler, _SIGNALS)))
    )
    replaced = map(_set_handler, handled, itertools.repeat(handler))
    return dict(zip(handled, replaced, strict=True))


def put_back_handlers(replaced: dict[int, Handler]) -> None:
    """Put back the handlers that ``replace_python_handlers`` returned (one C call)."""
    collections.deque(itertools.starmap(_set_handler, replaced.items()), maxlen=0)


def raise_signals(signals: Iterable[int]) -> None:
    """Send this thread each of *signals* again, for its own handler to run.

    Python runs the handlers at its next check for signals, in the order of the
    signal numbers, one raised exception at a time: what it would have done had
    the signals not been held back.
    """
    collections.deque(map(_raise_signal, signals), maxlen=0)
