"""What the runtime takes from CPython's internals, checked on every supported Python.

Three private things have no public equivalent: ``_signal``'s functions (the C
functions under ``signal.signal`` and ``signal.getsignal``, without their enum
conversions), a thread's ``_tstate_lock`` (which ``join_thread`` waits on where
``Thread.join()`` cannot be interrupted safely), and a loop's
``_default_executor`` with its ``_threads`` (the workers that the leak checks
leave out).  The runtime reads each behind an explicit version check; this test
runs the runtime itself, on each Python of ``PYTHON_VERSIONS`` found here, and
proves what the check assumes: a version it covers has the thing and the thing
behaves as the runtime expects.  A Python that is missing is skipped (the
template's CI workflow has all of them).
"""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from tests.matrix import PYTHON_VERSIONS, TEMPLATE_RUNTIME, find_python

CHECK = textwrap.dedent(
    """
    import asyncio
    import signal
    import sys
    import threading

    from _runtime import _cleanup, _resource

    # _signal: what InterruptDeferral swaps handlers with.
    assert _cleanup._RAW_SIGNAL_FUNCTIONS is (sys.version_info < (3, 15))
    import _signal

    assert _resource._get_handler is _cleanup._get_handler is _signal.getsignal
    assert _cleanup._set_handler is _signal.signal
    assert _cleanup._raise_signal is _signal.raise_signal
    def handler(signum, frame):
        raise AssertionError("not deferred")
    before = signal.getsignal(signal.SIGINT)
    assert _signal.getsignal(signal.SIGINT) is before
    assert _signal.signal(signal.SIGINT, handler) is before
    assert signal.getsignal(signal.SIGINT) is handler
    assert _signal.signal(signal.SIGINT, before) is handler
    assert _signal.signal(signal.SIGINT, int(signal.SIG_IGN)) is before  # no enums
    assert type(_signal.getsignal(signal.SIGINT)) is int
    _signal.signal(signal.SIGINT, before)
    interrupted = []
    try:
        with _resource.deferred_interrupts():
            assert _resource.deferred_interrupts().deferring()
            signal.raise_signal(signal.SIGINT)
            interrupted.append("inside")  # held back to the end of the block
    except KeyboardInterrupt:
        interrupted.append("after")
    assert interrupted == ["inside", "after"], interrupted
    assert signal.getsignal(signal.SIGINT) is before

    # _tstate_lock: what join_thread waits on before 3.13.
    assert _resource._JOINS_ON_TSTATE_LOCK is (sys.version_info < (3, 13))
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    if _resource._JOINS_ON_TSTATE_LOCK:
        lock = thread._tstate_lock
        assert type(lock) is type(threading.Lock()), lock
        assert lock.locked()  # held by the thread while it runs
    release.set()
    _resource.join_thread(thread)
    assert not thread.is_alive()
    if _resource._JOINS_ON_TSTATE_LOCK:
        assert not lock.locked()

    # _default_executor: whose workers the leak checks leave out.
    async def main():
        loop = asyncio.get_running_loop()
        ident = await loop.run_in_executor(None, threading.get_ident)
        executor = loop._default_executor
        workers = {thread.ident: thread.name for thread in executor._threads}
        assert ident in workers, workers
        assert workers[ident].startswith("asyncio_"), workers  # the fallback's names

    asyncio.run(main())
    print("checked", sys.version_info[:2])
    """
)


@pytest.mark.parametrize("python_version", PYTHON_VERSIONS)
def test_runtime_internals_hold_on(python_version: str) -> None:
    python = find_python(python_version)
    if python is None:
        pytest.skip(f"no Python {python_version} here")
    result = subprocess.run(
        [str(python), "-W", "error", "-c", CHECK],
        cwd=TEMPLATE_RUNTIME.parent,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"checked ({python_version.replace('.', ', ')})" in result.stdout


def test_the_executor_fallback_is_guarded_like_the_check_above() -> None:
    """The runtime reads the loop's private executor on the Pythons checked above only."""
    guard = "_LOOP_EXECUTOR_KNOWN = sys.version_info < (3, 15)"
    modules = TEMPLATE_RUNTIME.rglob("*.py")
    assert any(guard in module.read_text(encoding="utf-8") for module in modules)
