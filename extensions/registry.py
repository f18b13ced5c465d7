"""The resource registry: the single source of truth for what a resource is.

Adding a resource means one entry in ``RESOURCES`` plus four templates, named after
the entry's ``module`` (``IF`` stands for ``{% if '<key>' in resources %}``):

* ``template/src/{{ package_name }}/IF<module>.py{% endif %}.jinja``
* ``template/tests/IFtest_<module>.py{% endif %}.jinja``
* ``template/tests/{% if resources %}stress{% endif %}/IFtest_<module>.py{% endif %}.jinja``
* ``template/{% if docs %}docs{% endif %}/resources/IF<module>.md{% endif %}.jinja``

``copier.yml`` must offer the entry's ``key`` with its ``title`` as a choice of the
``resources`` question; ``tests/test_registry.py`` keeps the two in agreement and checks
the four templates exist. ``docs/adding-a-resource.md`` lists every other file a new
resource touches.

This module has no third-party imports: the Copier extension (``template.py``) and the
template's own tests both load it.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
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
    ),
    Resource(
        key="sqlite",
        title="SQLite (connection that closes, transactions)",
        module="sqlite",
        exports=("SQLiteConnection", "SQLiteTransaction"),
        async_exports=("AsyncSQLiteConnection",),
        summary="A sqlite3 connection that is closed on exit, with explicit transactions.",
    ),
    Resource(
        key="socket",
        title="Sockets (TCP client and server)",
        module="sockets",
        exports=("TCPClient", "TCPServer"),
        async_exports=("AsyncTCPClient", "AsyncTCPServer"),
        summary="TCP connections and listening servers that close every socket they made.",
        benchmark_server="tcp",
    ),
    Resource(
        key="http",
        title="HTTP responses (urllib, with timeouts)",
        module="http_responses",
        exports=("ManagedResponse",),
        async_exports=("AsyncManagedResponse",),
        summary="urllib responses, error bodies included, closed on every path.",
        benchmark_server="http",
    ),
    Resource(
        key="lock",
        title="Locks (acquire with a timeout)",
        module="locks",
        exports=("TimedLock", "ReusableTimedLock"),
        async_exports=("AsyncTimedLock",),
        summary="Lock, RLock and Semaphore acquired with a timeout and always released.",
    ),
    Resource(
        key="tempdir",
        title="Temporary directories (private, always removed)",
        module="tempdirs",
        exports=("PrivateTemporaryDirectory",),
        async_exports=("AsyncPrivateTemporaryDirectory",),
        summary="A mode-0700 temporary directory removed on every exit path.",
    ),
    Resource(
        key="subprocess",
        title="Child processes (terminate, kill, reap)",
        module="processes",
        exports=("ManagedProcess",),
        async_exports=("AsyncManagedProcess",),
        summary="Child processes that are terminated, killed if need be, and always reaped.",
    ),
    Resource(
        key="executor",
        title="Thread pools (cancel and join on error)",
        module="executors",
        exports=("ManagedThreadPool",),
        async_exports=(),
        summary="A thread pool that cancels pending work on error and joins every worker.",
    ),
    Resource(
        key="postgres",
        title="PostgreSQL (psycopg connection, transactions, pool)",
        module="postgres",
        exports=("PostgresConnection", "PostgresTransaction", "PostgresPool"),
        async_exports=("AsyncPostgresConnection", "AsyncPostgresPool"),
        summary="psycopg connections, transactions and pools, closed on every path.",
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
    "_cleanup",
    "_resource",
    "async_helpers",
    "errors",
    "helpers",
    "pytest_plugin",
    "testing",
)
"""The modules of the runtime, which only ever import each other and the
standard library (and ``psutil`` and ``pytest`` for the test tools)."""

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
    return problems
