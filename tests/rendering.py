"""Rendering every combination fast: the template compiled once, no git per file.

A render spent about half of its time compiling the same Jinja sources again
(copier builds a new environment for every render, and Jinja caches compiled
templates per environment only) and about a quarter starting ``git config
core.fileMode`` once per rendered file.  Inside ``fast_rendering()`` both are taken
out (``python -m tests.benchmark --profile-render 20`` prints the two costs):

- **Compiled once.** ``jinja2.Environment.compile`` is memoised on the source as
  the extensions' ``preprocess`` hooks return it, on the name and file name, and
  on every setting of the environment that the lexer, parser, optimiser and code
  generator read (``compile_settings``).  Its result is Python code for that
  source, executed later against whichever environment renders it, which is how
  Jinja's own ``bytecode_cache`` reuses compiled templates across processes.  A
  source that uses an extension's tag is compiled every time (``_has_side_effects``).
- **No git per file.** Copier asks git, for every file it writes, whether the
  destination repository ignores the executable bit
  (``Worker._sync_git_index_executable_bit``, new in copier 9.15.0: the template's
  copier range starts no lower); outside a git work tree its answer
  is a no-op by its own contract.  The matrix renders into pytest's temporary
  folders, never inside a work tree.

``tests/test_harness.py`` checks that a fast render equals a plain one, byte for
byte and mode for mode, that a second render comes entirely from the memo, that a
changed source is compiled again, and that copier's ``{% yield %}`` still works.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import inspect
import re
import stat
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import jinja2.ext
from copier import _main as copier_main

if TYPE_CHECKING:
    from collections.abc import Iterator

_plain_compile: Any = jinja2.Environment.compile
_compiled: dict[tuple[Any, ...], Any] = {}
_settings: weakref.WeakKeyDictionary[jinja2.Environment, tuple[Any, ...]] = (
    weakref.WeakKeyDictionary()
)
_side_effects: weakref.WeakKeyDictionary[jinja2.Environment, re.Pattern[str] | bool] = (
    weakref.WeakKeyDictionary()
)
COMPILES: collections.Counter[str] = collections.Counter()
"""``memoised`` and ``compiled`` compiles in this process: the memo's hits and misses."""


@functools.cache
def _file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _fingerprint(function: Any) -> tuple[Any, ...]:
    """Identify a filter or test by what it does, not by the object.

    Copier and the template's extension make new function objects for every
    environment.  The code generator reads a filter's ``pass_context`` family
    marker, and the optimiser calls a filter on constant arguments while
    compiling, so both the marker and the code (the source file it comes from)
    are part of the fingerprint.
    """
    if isinstance(function, functools.partial):
        return ("partial", _fingerprint(function.func), len(function.args), *function.keywords)
    marker = getattr(function, "jinja_pass_arg", None)
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", type(function).__qualname__)
    try:
        source = inspect.getsourcefile(function)
    except TypeError:  # a builtin
        source = None
    return (marker, module, qualname, _file_digest(source) if source else None)


def compile_settings(env: jinja2.Environment) -> tuple[Any, ...]:
    """Everything of *env* that the lexer, parser, optimiser and code generator read.

    The context class is left out on purpose: the compiler never reads it, and
    ``copier_template_extensions`` makes a new one for every environment.
    """
    if env not in _settings:
        _settings[env] = (
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
            env.autoescape if not callable(env.autoescape) else _fingerprint(env.autoescape),
            env.is_async,
            env.code_generator_class,
            tuple(
                (type(ext).__module__, type(ext).__qualname__, ext.priority)
                for ext in env.iter_extensions()
            ),
            _fingerprint(env.finalize) if env.finalize is not None else None,
            tuple(sorted((name, repr(value)) for name, value in env.policies.items())),
            tuple(sorted((name, _fingerprint(f)) for name, f in env.filters.items())),
            tuple(sorted((name, _fingerprint(t)) for name, t in env.tests.items())),
        )
    return _settings[env]


def _side_effect_check(env: jinja2.Environment) -> re.Pattern[str] | bool:
    """How to tell, for *env*, whether compiling a source does more than return code.

    ``True``: every source (an extension filters the token stream, or line
    statements are on); ``False``: none; a pattern: the sources it finds, those
    that open one of the extensions' tags.  Computed once per environment.
    """
    if env not in _side_effects:
        extensions = list(env.iter_extensions())
        tags = [tag for ext in extensions for tag in ext.tags]
        check: re.Pattern[str] | bool = bool(tags) and re.compile(
            re.escape(env.block_start_string) + r"[-+]?\s*(?:" + "|".join(tags) + r")\b"
        )
        if env.line_statement_prefix is not None or any(
            type(ext).filter_stream is not jinja2.ext.Extension.filter_stream for ext in extensions
        ):
            check = True
        _side_effects[env] = check
    return _side_effects[env]


def _has_side_effects(env: jinja2.Environment, source: str) -> bool:
    """Would compiling *source* do more than return code (an extension's tag or stream)?

    Copier's ``{% yield %}`` tag records its loop on the environment while it is
    parsed: a source that uses an extension's tag, or any source when an
    extension filters the token stream or line statements are on, is compiled
    every time, as without the memo.
    """
    check = _side_effect_check(env)
    if isinstance(check, bool):
        return check
    return check.search(source) is not None


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
    # The extensions' preprocess hooks run on every compile, as they would without
    # the memo (copier's resets its yield state there; it does nothing else), and
    # what they return is what gets lexed: that is the key.
    lexed = self.preprocess(source, name, filename)
    if _has_side_effects(self, lexed):
        COMPILES["compiled"] += 1
        return _plain_compile(self, source, name, filename, raw, defer_init)
    key = (compile_settings(self), lexed, name, filename, raw, defer_init)
    if key in _compiled:
        COMPILES["memoised"] += 1
        return _compiled[key]
    COMPILES["compiled"] += 1
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
