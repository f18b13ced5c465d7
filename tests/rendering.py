"""Rendering every combination fast: the template compiled once, no git per file.

A render of the all-resources project costs about 0.6 s of which copier spends
half compiling the same Jinja sources again (every render builds a new
environment, and Jinja caches compiled templates per environment only) and a
quarter starting ``git config core.fileMode`` once per rendered file.  Inside
``fast_rendering()`` both are taken out, and the render costs about 0.1 s:

- **Compiled once.** ``jinja2.Environment.compile`` is memoised on the source, the
  name, the file name and every setting of the environment that the compiler
  reads (``compile_settings``).  Its result is Python code for that source,
  executed later against whichever environment renders it, which is how Jinja's
  own ``bytecode_cache`` reuses compiled templates across processes.
- **No git per file.** Copier 9.19 asks git, for every file it writes, whether
  the destination repository ignores the executable bit; outside a git work tree
  its answer is a no-op by its own contract.  The matrix renders into pytest's
  temporary folders, never inside a work tree (``test_fast_render_is_the_plain_render``
  checks both that and that a fast render equals a plain one, byte for byte and
  mode for mode).
"""

from __future__ import annotations

import contextlib
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from copier import _main as copier_main

if TYPE_CHECKING:
    from collections.abc import Iterator

_plain_compile: Any = jinja2.Environment.compile
_compiled: dict[tuple[Any, ...], Any] = {}


def compile_settings(env: jinja2.Environment) -> tuple[Any, ...]:
    """Everything of *env* that the lexer, parser and code generator read."""
    return (
        type(env),
        env.block_start_string,
        env.block_end_string,
        env.variable_start_string,
        env.variable_end_string,
        env.comment_start_string,
        env.comment_end_string,
        env.line_statement_prefix,
        env.line_comment_prefix,
        env.trim_blocks,
        env.lstrip_blocks,
        env.newline_sequence,
        env.keep_trailing_newline,
        env.optimized,
        env.autoescape if not callable(env.autoescape) else id(env.autoescape),
        env.is_async,
        env.code_generator_class,
        env.context_class,
        tuple((type(ext).__module__, type(ext).__qualname__) for ext in env.iter_extensions()),
        env.finalize,
        tuple(sorted((name, repr(value)) for name, value in env.policies.items())),
        # The compiler refuses unknown filters and tests: their names are read too.
        frozenset(env.filters),
        frozenset(env.tests),
    )


def _memoised_compile(
    self: jinja2.Environment,
    source: Any,
    name: str | None = None,
    filename: str | None = None,
    raw: bool = False,
    defer_init: bool = False,
) -> Any:
    if not isinstance(source, str):
        return _plain_compile(self, source, name, filename, raw, defer_init)
    key = (compile_settings(self), source, name, filename, raw, defer_init)
    try:
        return _compiled[key]
    except KeyError:
        code = _compiled[key] = _plain_compile(self, source, name, filename, raw, defer_init)
        return code


def _skip_git_index_sync(self: Any, dst_relpath: Path, src_mode: int) -> None:
    del self, dst_relpath, src_mode


@contextlib.contextmanager
def fast_rendering() -> Iterator[None]:
    """Within the block, copier renders with both shortcuts of this module."""
    worker = copier_main.Worker
    if not hasattr(worker, "_sync_git_index_executable_bit"):
        raise AssertionError(
            "copier no longer has Worker._sync_git_index_executable_bit: "
            "check what it does now and revisit tests/rendering.py"
        )
    sync = worker.__dict__["_sync_git_index_executable_bit"]
    jinja2.Environment.compile = _memoised_compile  # type: ignore[method-assign]
    worker._sync_git_index_executable_bit = _skip_git_index_sync  # type: ignore[method-assign]
    try:
        yield
    finally:
        jinja2.Environment.compile = _plain_compile  # type: ignore[method-assign]
        worker._sync_git_index_executable_bit = sync  # type: ignore[method-assign]


def tree_of(project: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of *project*: its bytes and its permission bits."""
    return {
        path.relative_to(project).as_posix(): (path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
        for path in sorted(project.rglob("*"))
        if path.is_file()
    }
