"""How a failed release is reported: the block's own exception always wins.

Every context manager built on this runtime follows one rule when its release step
raises.  The exception raised by the block (the *primary* one) keeps propagating
unchanged, and the release failure is attached to it as a note
(``BaseException.add_note``).  Without a primary exception the failure is raised
itself.  The one exception to the rule is an interrupt, an exception that is not an
``Exception`` (``KeyboardInterrupt``, ``SystemExit``, ``asyncio.CancelledError``),
raised by a release while the block raised an ordinary ``Exception``: the interrupt
wins, with the block's exception as its ``__context__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["call_each", "cleanup_outcome", "raise_unless_noted"]

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
