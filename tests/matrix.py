"""The answer matrix, and what each check of a rendered project depends on.

Every combination of ``resources`` (all subsets of the registry) x ``async_support`` x
``docs`` is rendered and checked.  The other choices (``license``, ``python_min``) are
covered by extra combinations.  The expensive checks are keyed by the content of the
files they read (``CheckLedger``), so a check whose inputs were already verified in
this session is not run again; ``import_purity_problems`` proves the premise that
makes a test file's outcome independent of the other resources chosen.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import functools
import hashlib
import itertools
import os
import posixpath
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "extensions"))

import registry as registry  # noqa: E402  (extensions/ is not a package)
import tables as tables  # noqa: E402  (the repository's lists made from the registry)

import template as template  # noqa: E402  (the Copier extension, for its constants)

PACKAGE = "pkg_under_test"
RUNTIME_DIR = f"src/{PACKAGE}/{registry.RUNTIME}"
"""Where a render holds the runtime, which every render gets byte for byte."""
TEMPLATE_RUNTIME = ROOT / "template" / "src" / "{{ package_name }}" / registry.RUNTIME
RUNTIME_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
DEFAULT_ANSWERS: dict[str, Any] = {
    "project_name": "Matrix Project",
    "package_name": PACKAGE,
    "license": "MIT",
    "python_min": "3.11",
}
LICENSES = ("MIT", "Apache-2.0", "BSD-3-Clause", "none")
PYTHON_VERSIONS = ("3.11", "3.12", "3.13", "3.14")


@dataclass(frozen=True)
class Combination:
    """One set of answers to render, with the checks it gets."""

    resources: tuple[str, ...]
    async_support: bool
    docs: bool
    license: str = "MIT"
    python_min: str = "3.11"

    @property
    def id(self) -> str:
        parts = ["+".join(self.resources) or "none"]
        parts.append("async" if self.async_support else "sync")
        parts.append("docs" if self.docs else "nodocs")
        if self.license != "MIT":
            parts.append(self.license)
        if self.python_min != "3.11":
            parts.append(f"py{self.python_min}")
        return "-".join(parts)

    @property
    def family(self) -> str:
        """The id without the docs answer: the two share every Python file but one.

        The docs answer adds pages, ``mkdocs.yml`` and ``tests/test_docs_examples.py``,
        so a combination and its docs twin share ruff's and pytest's checks of every
        other file and, docs twin first, its mypy run (``mypy_keys_settled``); run
        one after the other on one worker, the second finds them done.
        """
        return family_of(self.id)

    @property
    def python(self) -> Path | None:
        """The interpreter that runs this project's suite: its floor, if installed.

        The floor is the version whose code paths the project takes (``python_min``
        3.12 writes sqlite's ``autocommit`` branch, 3.11 its older twin), so each
        combination runs on that version, or is checked statically only.
        """
        return find_python(self.python_min)

    def base(self) -> Combination:
        """The combination of no resource, no async, no docs, with these other answers.

        Every combination of a base is rendered from it (``tests/rendering.py``).
        """
        return Combination((), False, False, license=self.license, python_min=self.python_min)

    def answers(self) -> dict[str, Any]:
        return {
            **DEFAULT_ANSWERS,
            "resources": list(self.resources),
            "async_support": self.async_support,
            "docs": self.docs,
            "license": self.license,
            "python_min": self.python_min,
        }


MAIN_BASE = Combination((), False, False)
"""The base of every combination but the few for the other licenses and floors."""


def family_of(combination_id: str) -> str:
    """``file+lock-async-docs-py3.12`` as ``file+lock-async-py3.12`` (``Combination.family``)."""
    parts = combination_id.split("-")
    if len(parts) < 3 or parts[2] not in ("docs", "nodocs"):
        raise ValueError(f"not a combination id: {combination_id!r}")
    return "-".join(parts[:2] + parts[3:])


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def find_python(version: str) -> Path | None:
    """An interpreter of *version* (``"3.12"``) on this machine, or ``None``.

    This environment's own for its version; else ``python3.12`` on ``PATH``, else
    the newest pyenv build of it (pyenv's shims are skipped: they answer for any
    version).
    """
    if version == RUNTIME_PYTHON:
        return Path(sys.executable)
    candidates: list[Path] = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if folder and "shims" not in Path(folder).parts:
            candidates.append(Path(folder) / f"python{version}")
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    builds = sorted(
        (pyenv_root / "versions").glob(f"{version}.*"),
        key=lambda build: _version_tuple(re.sub(r"[^0-9.].*", "", build.name) or "0"),
        reverse=True,
    )
    candidates += [build / "bin" / f"python{version}" for build in builds]
    return next((path for path in candidates if os.access(path, os.X_OK)), None)


def all_subsets(keys: tuple[str, ...]) -> list[tuple[str, ...]]:
    return [
        subset for size in range(len(keys) + 1) for subset in itertools.combinations(keys, size)
    ]


def _other_choices(keys: tuple[str, ...]) -> list[Combination]:
    """One combination per other license, two per newer Python floor."""
    combos = [Combination(keys[:1], False, True, license=lic) for lic in LICENSES if lic != "MIT"]
    for version in PYTHON_VERSIONS:
        if version != "3.11":
            combos += [Combination(keys, a, True, python_min=version) for a in (False, True)]
    return combos


def registry_keys(chosen: str | None = None) -> tuple[str, ...]:
    """The registry's resource keys, or those named in *chosen* (``"file,sqlite"``).

    A cut of the registry serves the benchmark that shows how the matrix grows
    with each resource; the keys keep the registry's order.
    """
    keys = tuple(resource.key for resource in registry.RESOURCES)
    if chosen is None:
        return keys
    named = [key.strip() for key in chosen.split(",") if key.strip()]
    unknown = sorted(set(named) - set(keys))
    if unknown or not named:
        raise ValueError(f"--matrix-keys: {unknown or chosen!r} not in the registry {keys}")
    return tuple(key for key in keys if key in named)


def full_matrix(keys: tuple[str, ...] | None = None) -> list[Combination]:
    """The other choices, then every subset of resources x async_support x docs.

    The other choices come first: the newer floors' combinations run every suite
    on their own interpreter, half a minute each, which at the end of the run left
    one worker waiting for the other.
    """
    keys = keys if keys is not None else registry_keys()
    combos = [
        Combination(subset, async_support, docs)
        for subset in all_subsets(keys)
        for async_support in (False, True)
        for docs in (True, False)  # the docs twin first: its mypy run settles both
    ]
    return _other_choices(keys) + combos


def sample_matrix(keys: tuple[str, ...] | None = None) -> list[Combination]:
    """The quick tier: no resource, each resource alone, and all of them."""
    keys = keys if keys is not None else registry_keys()
    subsets = list(dict.fromkeys([(), *((key,) for key in keys), keys]))
    combos = [Combination(s, a, d) for s in subsets for a in (False, True) for d in (True, False)]
    return _other_choices(keys) + combos


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/5"`` as ``(2, 5)``: the second of five shards."""
    match = re.fullmatch(r"([1-9][0-9]*)/([1-9][0-9]*)", text.strip())
    if match is None or int(match[1]) > int(match[2]):
        raise ValueError(f"--shard {text!r}: expected I/N with 1 <= I <= N, such as 2/5")
    return int(match[1]), int(match[2])


def shard_of(units: list[str], count: int) -> dict[str, int]:
    """Deal *units* (combination ids, then other test ids) to *count* shards in turn.

    Every unit gets exactly one shard from 1 to *count*, whatever the count, so the
    shards of one collection are disjoint and together hold all of it; the tests of
    one combination are one unit, so no render is repeated in two shards.
    """
    return {unit: position % count + 1 for position, unit in enumerate(dict.fromkeys(units))}


class Files:
    """A render's files by path, from memory (a render) or a folder.

    The checks read a combination through it: a render that needs no tool is
    never written to disk.
    """

    __slots__ = ("_dirs", "_entries", "_names")

    def __init__(self, entries: Mapping[str, bytes]) -> None:
        self._entries = entries
        self._names = sorted(entries)
        self._dirs = {
            name.rsplit("/", depth)[0]
            for name in self._names
            for depth in range(1, name.count("/") + 1)
        }

    @classmethod
    def of(cls, source: Path | Files | Mapping[str, tuple[bytes, int]]) -> Files:
        """*source*'s files: a folder's (read now), or a render's (path: bytes and mode)."""
        if isinstance(source, Files):
            return source
        if isinstance(source, Path):
            names = [n for n in project_files(source) if not _SKIPPED.intersection(n.split("/"))]
            return cls({name: (source / name).read_bytes() for name in names})
        return cls({name: data for name, (data, _) in source.items()})

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def read(self, name: str) -> bytes:
        return self._entries[name]

    def text(self, name: str) -> str:
        return self._entries[name].decode("utf-8")

    def names(self, folder: str = "", suffix: str = "") -> list[str]:
        """The files under *folder* (at any depth) whose names end with *suffix*, sorted."""
        prefix = f"{folder}/" if folder else ""
        return [name for name in self._names if name.startswith(prefix) and name.endswith(suffix)]

    def is_dir(self, name: str) -> bool:
        return name in self._dirs


_SKIPPED = frozenset({".git", ".venv", "__pycache__", ".pytest_cache"})
"""Folders of a project on disk that no check reads: git's, an environment, caches."""

Source = Path | Files | Mapping[str, tuple[bytes, int]]
"""What the checks below read: a project folder, or a render in memory."""


def expected_files(combo: Combination) -> set[str]:
    """Every file the render of ``combo`` must contain, and nothing else."""
    files = {
        ".copier-answers.yml",
        ".gitignore",
        ".pre-commit-config.yaml",
        ".python-version",
        "CHANGELOG.md",
        "CONTRIBUTING.md",
        "README.md",
        "SECURITY.md",
        "pyproject.toml",
        f"src/{PACKAGE}/__init__.py",
        f"src/{PACKAGE}/py.typed",
        "benchmarks/overhead.py",
        "tests/conftest.py",
        "tests/test_package.py",
        "tests/test_update_leftovers.py",
    }
    files |= set(AUDITED_FILES) | {".github/pull_request_template.md"}
    if not combo.docs:
        files.discard(".github/workflows/docs.yml")
    files |= {f"src/{PACKAGE}/{module}.py" for module in registry.CORE_MODULES}
    files |= {f"{RUNTIME_DIR}/{module}.py" for module in registry.RUNTIME_MODULES}
    files.add("tests/test_toolkit.py")  # the runtime's own tests are the template's
    if combo.resources:  # the stress tier (pytest -m stress)
        files |= {f"tests/stress/{name}.py" for name in ("__init__", "conftest")}
    if any(registry.BY_KEY[key].benchmark_server for key in combo.resources):
        files.add("benchmarks/loopback.py")  # the benchmark's server child
    if combo.license != "none":
        files.add("LICENSE")
    if combo.docs:
        files |= {"mkdocs.yml", "docs/index.md", "docs/errors.md", "overrides/main.html"}
        files |= {"docs/helpers.md", "docs/testing.md"}
        files |= {"docs/tutorial.md", "tests/test_docs_examples.py"}
    for key in combo.resources:
        module = registry.BY_KEY[key].module
        files |= {f"src/{PACKAGE}/{module}.py", f"tests/test_{module}.py"}
        files.add(f"tests/stress/test_{module}.py")
        if combo.docs:
            files.add(f"docs/resources/{module}.md")
    return files


AUDITED_FILES: dict[str, str | None] = {
    ".github/workflows/ci.yml": "vendor.github-workflows",
    ".github/workflows/release.yml": "vendor.github-workflows",
    ".github/workflows/docs.yml": "vendor.github-workflows",  # with docs only
    ".github/dependabot.yml": "vendor.dependabot",
    ".github/ISSUE_TEMPLATE/bug_report.yml": "vendor.github-issue-forms",
    ".github/ISSUE_TEMPLATE/feature_request.yml": "vendor.github-issue-forms",
    ".github/ISSUE_TEMPLATE/config.yml": "vendor.github-issue-config",
    ".pre-commit-config.yaml": None,
}
"""The GitHub and hook files of every render, with the schema each must satisfy.

``zizmor`` audits the workflows, the Dependabot config and the pre-commit config;
``check-jsonschema`` validates each file that has a schema against it; ``prek
validate-config`` reads the pre-commit config.
"""

ZIZMOR_AUDITED = (".github/workflows/", ".github/dependabot.yml", ".pre-commit-config.yaml")


def audit_keys(project: Source) -> dict[str, str]:
    """Key each audited file by its own bytes and the schema it is checked against.

    That is all the audit reads: ``zizmor --offline --no-config`` audits each input
    file on its own (no audit reads another file, a configuration or the network),
    ``check-jsonschema --builtin-schema`` validates against a schema shipped in the
    package, and ``prek validate-config`` reads only the file it is given.  The
    tools' versions are fixed for a session.
    """
    files = Files.of(project)
    return {
        name: digest(name, schema or "", files.read(name))
        for name, schema in AUDITED_FILES.items()
        if name in files
    }


def project_files(project: Path) -> set[str]:
    return {
        path.relative_to(project).as_posix()
        for path in project.rglob("*")
        if path.is_file()
        and not any(part.startswith((".mypy_cache", ".ruff_cache")) for part in path.parts)
    }


JINJA_LEFTOVER = re.compile(r"\{\{|\}\}|\{%|%\}|\{#|#\}")
_GHA_EXPRESSION = re.compile(r"\$\{\{[^}]*\}\}")


def jinja_leftovers(project: Source) -> list[str]:
    """Lines that still look like Jinja (GitHub Actions ``${{ }}`` expressions excepted)."""
    files = Files.of(project)
    found = []
    for name in files.names():
        if name.startswith("overrides/"):
            continue  # the docs theme's own Jinja templates
        found += [f"{name}:{line}" for line in _leftover_lines(files.read(name))]
    return found


@functools.cache
def _leftover_lines(data: bytes) -> tuple[str, ...]:
    text = data.decode("utf-8")
    return tuple(
        f"{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if JINJA_LEFTOVER.search(_GHA_EXPRESSION.sub("", line))
    )


# -- what the checks depend on ------------------------------------------------------


def digest(*parts: bytes | str) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else _file_digest(part)
        hasher.update(len(data).to_bytes(8, "big"))
        hasher.update(data)
    return hasher.hexdigest()


@functools.lru_cache(maxsize=65536)
def _file_digest(data: bytes) -> bytes:
    """A file's own digest, once per distinct content: renders share most files'
    bytes objects, whose hash Python keeps, so a key costs a lookup per file."""
    return hashlib.sha256(data).digest()


def _table(pyproject: dict[str, Any], *keys: str) -> str:
    value: Any = pyproject
    for key in keys:
        value = value.get(key, {})
    return repr(value)


# The facts read from a module's syntax tree are functions of its source alone, so
# they are memoised on the source's bytes: a session parses each distinct file once,
# not once per combination that holds it (that was a third of the harness's own time).


@functools.cache
def _imported_package_modules(source: bytes) -> frozenset[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith(f"{PACKAGE}."):
                modules.add(node.module.split(".")[1])
            elif node.module == PACKAGE:
                modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            modules |= {
                alias.name.split(".")[1]
                for alias in node.names
                if alias.name.startswith(f"{PACKAGE}.")
            }
    return frozenset(modules)


def runtime_files(folder: Path) -> dict[str, bytes]:
    """The runtime's modules under *folder* (at any depth), by relative path, with their bytes."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def runtime_digest(project: Source) -> str:
    """One digest of a render's runtime: every test and page depends on all of it."""
    files = Files.of(project)
    names = files.names(RUNTIME_DIR, ".py")  # the runtime at any depth
    return digest(*(part for name in names for part in (name, files.read(name))))


def keys_of_test_files(project: Source) -> dict[str, str]:
    """Key each test file by everything its outcome can depend on.

    That is the test file, ``conftest.py``, the pytest settings and the Python
    floor, the core modules and the runtime, and the package modules it imports.  Not included:
    ``__init__.py`` and the modules of resources the test does not import, which
    is sound because ``import_purity_problems`` is empty (importing them defines
    names and does nothing else).  ``test_update_leftovers.py`` (which ``conftest.py``
    imports) reads every file of the project, but only for conflict markers and
    ``*.rej`` files, which no render holds (``tests/test_update_layout.py`` checks
    the template's files).  ``test_package.py`` imports the package itself,
    so its key covers every module, and it runs ``benchmarks/overhead.py`` (and
    ``benchmarks/loopback.py``, its server child), so the key covers them too.
    ``test_docs_examples.py`` is keyed page by page (``_docs_example_keys``).
    A test file in a folder of its own (``stress/``) is also keyed by the other
    modules of that folder (its ``__init__.py`` and ``conftest.py``) and the
    package modules they import; the stress tier's machinery is the runtime's
    (``stress``, ``async_stress``), which every key covers.
    """
    files = Files.of(project)
    pyproject = _pyproject(files.read("pyproject.toml"))
    modules = _package_modules(files)
    always = [name for name in modules if name in registry.CORE_MODULES]
    shared = digest(
        files.read("tests/conftest.py"),
        files.read("tests/test_update_leftovers.py"),  # conftest imports it
        _table(pyproject, "tool", "pytest"),
        _table(pyproject, "project", "requires-python"),
        *(modules[name] for name in always),
        runtime_digest(files),
    )
    keys: dict[str, str] = {}
    tests = [name.removeprefix("tests/") for name in files.names("tests", ".py")]
    folders = {name.split("/")[0] for name in tests if name.count("/") == 1}
    support = {folder: _support_modules(files, folder) for folder in sorted(folders)}
    for test in tests:
        folder, _, file_name = test.rpartition("/")
        if not file_name.startswith("test_") or test.count("/") > 1:
            continue
        source = files.read(f"tests/{test}")
        imported = set(_imported_package_modules(source))
        extra: list[bytes | str] = []
        if folder:
            modules_of_folder, support_imports = support[folder]
            extra += modules_of_folder
            imported |= support_imports
        if file_name == "test_package.py" or "__init__" in imported:
            imported = set(modules)
            # test_package.py also runs the overhead benchmark, and its server child.
            benchmarks = files.names("benchmarks", ".py")
            extra += [files.read(name) for name in benchmarks if name.count("/") == 1]
        if file_name == DOCS_EXAMPLES:
            keys |= _docs_example_keys(files, shared, source, modules)
            continue
        keys[test] = digest(
            shared,
            source,
            *extra,
            *(name.encode() + modules[name] for name in sorted(imported & set(modules))),
        )
    return keys


def _support_modules(files: Files, folder: str) -> tuple[list[bytes | str], frozenset[str]]:
    """A test folder's modules other than its tests, by name and bytes, and the
    package modules they import."""
    named: list[bytes | str] = []
    imported: set[str] = set()
    for name in files.names(f"tests/{folder}", ".py"):
        file_name = name.rsplit("/", 1)[1]
        if name.count("/") == 2 and not file_name.startswith("test_"):
            source = files.read(name)
            named += [file_name, source]
            imported |= _imported_package_modules(source)
    return named, frozenset(imported)


def _package_modules(files: Files) -> dict[str, bytes]:
    """The package's own modules (the runtime's are not), by name, with their bytes."""
    src = f"src/{PACKAGE}"
    return {
        name.removeprefix(f"{src}/").removesuffix(".py"): files.read(name)
        for name in files.names(src, ".py")
        if name.count("/") == 2
    }


@functools.lru_cache(maxsize=256)
def _pyproject(data: bytes) -> dict[str, Any]:
    return tomllib.loads(data.decode("utf-8"))


DOCS_EXAMPLES = "test_docs_examples.py"
_PACKAGE_IMPORT = re.compile(rf"\b(?:from|import)\s+{PACKAGE}(?:\.(\w+))?\b")
FENCE = re.compile(r"^ *(```+|~~~+) *([\w-]*)", re.MULTILINE)
"""The generated ``test_docs_examples.py``'s own ``FENCE`` (the harness checks they agree)."""
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_MARKERS = ("```", "~~~", "<!--", "-->")
_READS_POSITION = re.compile(
    r"__file__|f_lineno|currentframe|getframeinfo|_getframe|inspect\.stack"
)


@functools.lru_cache(maxsize=4096)
def _example_skeleton(data: bytes) -> str:
    return example_skeleton(data.decode("utf-8"))


def example_skeleton(text: str) -> str:
    """The lines of a docs page that its examples can be read from, in order.

    ``test_docs_examples.py`` reads a page only through Sybil's Markdown code-block
    parsers (fenced blocks, and ``invisible-code-block`` directives in HTML
    comments) and its own ``fences()``.  The skeleton keeps every line of a fenced
    block as ``fences()`` finds them (the same pattern and pairing), every line of
    an HTML comment, and every line holding a fence or comment marker anywhere; it
    drops the rest, the prose, which neither reads.  What is dropped moves the
    examples to other line numbers, which only the failure messages show: no
    example of the generated docs reads its own position (``__file__`` or a frame's
    line number), which ``_docs_example_keys`` checks on every render.
    ``tests/test_harness.py`` parses each page of a render and its
    skeleton with the generated test's own Sybil and finds the same examples.
    """
    spans = [match.span() for match in _COMMENT.finditer(text)]
    opening: re.Match[str] | None = None
    for match in FENCE.finditer(text):
        if opening is None:
            opening = match
        elif match.group(1).startswith(opening.group(1)) and not match.group(2):
            spans.append((opening.start(), match.end()))
            opening = None
    if opening is not None:  # an unclosed fence runs to the end of the page
        spans.append((opening.start(), len(text)))
    kept = []
    offset = 0
    for line in text.splitlines(keepends=True):
        end = offset + len(line)
        inside = any(start < end and offset < stop for start, stop in spans)
        if inside or any(marker in line for marker in _MARKERS):
            kept.append(line)
        offset = end
    return "".join(kept)


def _docs_example_keys(
    files: Files, shared: str, source: bytes, modules: dict[str, bytes]
) -> dict[str, str]:
    """Key the examples of each docs page: ``test_docs_examples.py::PAGE``.

    The test runs each page on its own: a fresh namespace and a fresh temporary
    folder per page, inside a ``LeakCheck`` that fails the page if it leaves
    anything open, so a page's outcome does not depend on the pages run before
    it.  It depends on the page's examples (``example_skeleton``: the prose of the
    tutorial's last sections and of the home page names the chosen resources, its
    examples far fewer combinations) and on the package modules they import (every
    module if one imports the package itself), beside what every test file depends
    on (*shared*) and the test file (*source*).
    """
    keys: dict[str, str] = {}
    for page in files.names("docs", ".md"):
        text = _example_skeleton(files.read(page))
        if _READS_POSITION.search(text):
            raise AssertionError(f"{page}: an example reads its own position; key its text")
        imported = {match[1] for match in _PACKAGE_IMPORT.finditer(text)}
        if None in imported:
            imported = set(modules)
        name = page.removeprefix("docs/")
        keys[f"{DOCS_EXAMPLES}::{name}"] = digest(
            shared,
            source,
            name,
            text,
            *(module.encode() + modules[module] for module in sorted(imported & set(modules))),
        )
    return keys


DOCS_EXAMPLE_TESTS = ("test_every_fence_is_run_or_a_shell_command", "test_examples_of_the_page_run")


def pytest_arguments(names: list[str]) -> list[str]:
    """The pytest arguments that run what the keys *names* of ``keys_of_test_files`` cover."""
    arguments = []
    for name in names:
        test, _, page = name.partition("::")
        if not page:
            arguments.append(f"tests/{test}")
            continue
        arguments.append(f"tests/{test}::test_the_docs_have_pages")
        arguments += [f"tests/{test}::{function}[{page}]" for function in DOCS_EXAMPLE_TESTS]
    return list(dict.fromkeys(arguments))


def mypy_key(project: Source, *, leaving_out: str | None = None) -> str:
    """Key a project's ``mypy --strict`` run by everything mypy reads.

    That is its settings (``[tool.mypy]``, whose ``python_version`` is the floor)
    and every file under the folders it checks (``files``: ``src``, ``tests``,
    ``benchmarks``; ``mypy_path`` is ``src``), by path and bytes.  The installed
    packages and their stubs are this session's.  Two combinations that differ
    only in their README or license read the same bytes and share the run.  With
    *leaving_out* (a path relative to the project), the key of the same project
    without that file.
    """
    files = Files.of(project)
    settings = _pyproject(files.read("pyproject.toml"))["tool"]["mypy"]
    folders = sorted({*settings["files"], settings["mypy_path"]})
    parts: list[bytes | str] = [repr(sorted(settings.items()))]
    for folder in folders:
        for name in files.names(folder):
            if "__pycache__" not in name.split("/") and name != leaving_out:
                parts += [name, files.read(name)]
    return digest(*parts)


def mypy_keys_settled(project: Source) -> list[str]:
    """The ``mypy_key`` values that a clean ``mypy --strict`` run on *project* settles.

    Its own, and for a project with docs, that of its docs-less twin, which is the
    same project without ``tests/test_docs_examples.py``.  The premise: mypy's
    verdict on a module depends on the module, the settings and what the module
    imports, and no file imports that test file, so leaving it out can remove
    errors but never add one.  The settings have no per-module overrides (whose
    ``warn_unused_configs`` verdict would depend on the files present).
    ``tests/test_harness.py`` checks each part of this on a render.
    """
    files = Files.of(project)
    keys = [mypy_key(files)]
    if f"tests/{DOCS_EXAMPLES}" in files:
        keys.append(mypy_key(files, leaving_out=f"tests/{DOCS_EXAMPLES}"))
    return keys


@functools.cache
def _top_level_imports(source: bytes) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return frozenset(names)


SOURCES = (".py", ".pyi")
"""What ruff lints (besides ``pyproject.toml``), and what makes a name first-party."""
FORMATTED = (*SOURCES, ".ipynb", ".md")
"""What ``ruff format`` formats: Python, notebooks, and the code blocks of Markdown."""


def ruff_keys(project: Source) -> dict[str, str]:
    """Key every file ``ruff check`` and ``ruff format`` read, each on its own.

    Ruff lints and formats each file by itself: the outcome for a file depends on
    its bytes, its path (``per-file-ignores``, module names), the ``[tool.ruff]``
    settings, and, for Python, two facts of the tree that the key adds: which of
    the names the file imports are first-party (a folder or module of that name
    under ``src`` or ``tests``, the ``src`` setting), and which of its folders are
    packages (``__init__.py``), for the same-package rule of import sorting.
    ``pyproject.toml`` itself is checked too (``RUF200``), and the formatter also
    formats the Python code blocks of Markdown files.  Checking only the files
    whose keys are new is then the same as checking the whole tree, which
    ``test_ruff_keys_cover_what_ruff_reads`` compares on one render.
    """
    files = Files.of(project)
    pyproject_bytes = files.read("pyproject.toml")
    settings = repr(_pyproject(pyproject_bytes)["tool"]["ruff"])
    roots = ("src", "tests")
    keys = {"pyproject.toml": digest("pyproject.toml", pyproject_bytes, settings)}
    for name in files.names():
        suffix = "." + name.rsplit(".", 1)[-1] if "." in name.rsplit("/", 1)[-1] else ""
        if suffix not in FORMATTED:
            continue
        source = files.read(name)
        first_party: list[str] = []
        packages: list[str] = []
        if suffix in SOURCES:
            first_party = sorted(
                f"{root}/{module}"
                for module in _top_level_imports(source)
                for root in roots
                if files.is_dir(f"{root}/{module}")
                or any(f"{root}/{module}{end}" in files for end in SOURCES)
            )
            parents = [name.rsplit("/", depth)[0] for depth in range(1, name.count("/") + 1)]
            packages = [folder for folder in parents if f"{folder}/__init__.py" in files]
        if suffix == ".md":
            source = _fenced(source)
        keys[name] = digest(name, source, settings, *first_party, "|", *packages)
    return keys


@functools.lru_cache(maxsize=4096)
def _fenced(source: bytes) -> bytes:
    return b"".join(fenced_lines(source.splitlines(keepends=True)))


_FENCE_OPENER = re.compile(rb"^(\s*)(`{3,}|~{3,})")


def fenced_lines(lines: list[bytes]) -> list[bytes]:
    """The lines of a Markdown file that ``ruff format`` can read: every fenced block.

    Ruff formats the Python code blocks of Markdown and nothing else of it, so a
    Markdown file's ruff key is its fenced blocks, and its prose (which lists the
    chosen resources in the README and the docs) stays out.  The blocks are taken
    generously, so that they hold every block ruff could see: any line whose
    text starts with three backticks or tildes opens one (nested in a list, or
    labelled with anything), and only a line of the same indentation holding the
    same fence and nothing else closes it (a block never closed runs to the end).
    ``tests/test_harness.py`` plants misformatted code in each form of block and
    checks that ruff finds it and that the key changes with it.
    """
    kept: list[bytes] = []
    closing: bytes | None = None
    for line in lines:
        if closing is not None:
            kept.append(line)
            if line.rstrip(b"\r\n") == closing:
                closing = None
            continue
        opener = _FENCE_OPENER.match(line)
        if opener:
            kept.append(line)
            closing = opener.group(1) + opener.group(2)
    return kept


_INLINE_LINK = re.compile(r"\]\(([^)\s]+)\)")
"""A Markdown inline link's target: the only link form the generated pages use
(``docs_link_forms_problems`` checks that on every render)."""


def page_links(page: Path, docs: Path) -> list[tuple[str, str]]:
    """The pages *page* links to, relative to *docs*, each with the anchor it names ('' if none)."""
    name = page.resolve().relative_to(docs.resolve()).as_posix()
    return list(_page_links(name, page.read_bytes()))


@functools.lru_cache(maxsize=4096)
def _page_links(name: str, text: bytes) -> tuple[tuple[str, str], ...]:
    """The links of the page *name* (relative to the docs folder), as ``page_links``."""
    links = []
    folder = name.rsplit("/", 1)[0] if "/" in name else ""
    for target in _INLINE_LINK.findall(text.decode("utf-8")):
        path, _, anchor = target.partition("#")
        if "://" in path or not path.endswith(".md"):
            continue
        links.append((posixpath.normpath(posixpath.join(folder, path)), anchor))
    return tuple(links)


def docs_link_forms_problems(project: Source) -> list[str]:
    """Links that ``page_links`` would not see: reference-style, HTML or by identifier.

    The docs build's keys (``docs_page_keys``) follow what a page links to, so
    every link must be an inline Markdown link to a page; an identifier
    cross-reference (``[text][identifier]``) in a page or a docstring would tie a
    page to another page's API that its key does not cover.
    """
    problems: list[str] = []
    files = Files.of(project)
    for name in [*files.names("docs", ".md"), *files.names(f"src/{PACKAGE}", ".py")]:
        problems += [f"{name}: {form}" for form in _link_forms(files.read(name))]
    return problems


_LINK_FORMS = {
    "reference-style link or cross-reference": re.compile(r"\]\[[^\]]*\]|^\[[^\]]+\]:\s", re.M),
    "HTML link": re.compile(r"<a\s[^>]*href", re.I),
}


@functools.lru_cache(maxsize=4096)
def _link_forms(data: bytes) -> tuple[str, ...]:
    text = data.decode("utf-8")
    return tuple(form for form, pattern in _LINK_FORMS.items() if pattern.search(text))


def docs_page_keys(project: Source) -> dict[str, str]:
    """Key each docs page by what its strict build's findings depend on.

    That is its text, the site settings, the modules it documents, and the pages
    it links to: for a plain link, whether the page exists; for a link to an
    anchor, the linked page's text, which makes its anchors.  A page also shows
    what its classes inherit (``inherited_members``) and the exceptions they name,
    so the core modules are part of every key, and its signatures link to what
    they name only where it is documented, with no finding where it is not
    (mkdocstrings' optional cross-references).  The nav and the index page's
    links change with the chosen resources; the test checks them statically on
    every render, so they are left out of the keys.
    """
    files = Files.of(project)
    src = f"src/{PACKAGE}"
    config = dict(_yaml(files.read("mkdocs.yml")))
    config.pop("nav", None)
    core: list[bytes | str] = [files.read(f"{src}/{module}.py") for module in registry.CORE_MODULES]
    core.append(runtime_digest(files))
    theme = files.read("overrides/main.html")
    settings = digest(repr(sorted(config.items())), theme, *core)
    keys: dict[str, str] = {}
    for page in files.names("docs", ".md"):
        text = files.read(page)
        documented = re.findall(rf"^::: {PACKAGE}\.(\w+)", text.decode("utf-8"), flags=re.MULTILINE)
        linked: list[bytes | str] = []
        is_index = page.rsplit("/", 1)[-1] == "index.md"
        if not is_index:
            for target, anchor in _page_links(page.removeprefix("docs/"), text):
                path = f"docs/{target}"
                exists = path in files
                linked += [target, anchor, files.read(path) if exists and anchor else str(exists)]
        keys[page] = digest(
            settings,
            text if not is_index else "",
            *(files.read(f"{src}/{module}.py") for module in documented),
            "links",
            *linked,
        )
    return keys


@functools.lru_cache(maxsize=256)
def _yaml(data: bytes) -> Any:
    return yaml.safe_load(data.decode("utf-8"))


DOCS_STUB = "# Checked elsewhere\n"
"""What a page whose key has passed becomes in a reduced docs build."""


_MYPY_SECONDS = itertools.count(1_000_000_000)


def give_distinct_mtimes(project: Path) -> None:
    """Give *project*'s Python files a whole-second mtime no other call gave.

    The premise of the mypy caches shared by the renders (``mypy_caches``):
    mypy takes a module as unchanged when its size, whole-second mtime and
    relative path match its cache entry, without reading it.  Two renders made
    in the same second then passed a module for the other's when their sizes
    matched (an ``__init__.py`` importing other modules: 2 failures in one full
    run).  With an mtime of its own, each module is hashed, and re-checked if it
    changed.  ``tests/test_harness.py`` checks the stamps.
    """
    second = next(_MYPY_SECONDS)
    for path in project.rglob("*.py"):
        os.utime(path, (second, second))


def reduce_docs_tree(project: Path, pending: set[str]) -> set[str]:
    """Stub out every page of *project*'s docs but *pending* and what they need; return those kept.

    *pending* names pages as ``docs_page_keys`` does (``docs/...``).  A kept page
    keeps every page it links to with an anchor (and so on), since its findings
    depend on that page's anchors; a page it links to plainly needs only to exist,
    which its stub does.  The stubs make no finding of their own, and every page
    stays in the nav, so the build checks the kept pages as the full build would:
    ``tests/test_harness.py`` compares the two on findings planted in each kind of
    page.
    """
    docs = project / "docs"
    kept = set(pending)
    queue = list(pending)
    while queue:
        page = project / queue.pop()
        if page.name == "index.md" or not page.is_file():
            continue
        for target, anchor in page_links(page, docs):
            name = f"docs/{target}"
            if anchor and name not in kept:
                kept.add(name)
                queue.append(name)
    for page in docs.rglob("*.md"):
        if page.relative_to(project).as_posix() not in kept:
            page.write_text(DOCS_STUB, encoding="utf-8")
    return kept


_PURE_CALLS = {
    "TypeVar",
    "ParamSpec",
    "TypeVarTuple",
    "NewType",
    "object",
    "frozenset",
    "tuple",
    "Literal",
    "get_args",
    "len",
    "dataclass",
    "field",
    "itertools.count",
    "weakref.WeakKeyDictionary",
}


def _pure_expression(node: ast.expr | None) -> bool:
    if node is None:
        return True
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            if ast.unparse(child.func) not in _PURE_CALLS:
                return False
        elif isinstance(child, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr, ast.Lambda)):
            return False
    return True


def _pure_statements(body: list[ast.stmt]) -> list[str]:
    problems = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not all(
                _pure_expression(d)
                for d in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]
            ):
                problems.append(f"line {node.lineno}: impure decorator or default")
            continue
        if isinstance(node, ast.ClassDef):
            if not all(_pure_expression(d) for d in node.decorator_list):
                problems.append(f"line {node.lineno}: impure class decorator")
            problems += _pure_statements(node.body)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            if not _pure_expression(getattr(node, "value", None)):
                problems.append(f"line {node.lineno}: assignment runs code")
        elif isinstance(node, ast.If):
            test = ast.unparse(node.test)
            if not (test.startswith("sys.version_info") or test == "TYPE_CHECKING"):
                problems.append(f"line {node.lineno}: condition {test!r} at import time")
            problems += _pure_statements(node.body) + _pure_statements(node.orelse)
        else:
            problems.append(f"line {node.lineno}: {type(node).__name__} runs at import time")
    return problems


def import_purity_problems(module: Path, source: bytes | None = None) -> list[str]:
    """Why importing ``module`` could do more than define names (empty: it cannot).

    Its *source*, if given, else the file's.
    """
    data = module.read_bytes() if source is None else source
    return [f"{module.name}: {problem}" for problem in _impure_statements(data)]


@functools.cache
def _impure_statements(source: bytes) -> tuple[str, ...]:
    return tuple(_pure_statements(ast.parse(source).body))


def init_problems(init: Path, source: bytes | None = None) -> list[str]:
    """``__init__.py`` may only import from package modules and define ``__all__``.

    Its *source*, if given, else the file's.
    """
    return list(_init_problems(init.read_bytes() if source is None else source))


@functools.cache
def _init_problems(source: bytes) -> tuple[str, ...]:
    problems = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"{PACKAGE}."):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and all(
            isinstance(t, ast.Name) and t.id == "__all__" for t in targets
        ):
            continue
        problems.append(f"__init__.py line {node.lineno}: {ast.unparse(node)[:60]}")
    return tuple(problems)


@dataclass
class CheckLedger:
    """Content-addressed record of checks that passed, shared by xdist workers.

    A check that passed for some inputs passes for the same inputs again: its key
    is a digest of everything it reads.  Records are files, created atomically.
    """

    root: Path
    ran: list[str] = field(default_factory=list)

    def passed(self, kind: str, key: str) -> bool:
        return (self.root / kind / key).exists()

    @contextlib.contextmanager
    def exclusive(self, kind: str, key: str) -> Iterator[None]:
        """Hold the check of *key* for this process alone.

        Another worker about to run the same check waits, then finds it passed.
        """
        directory = self.root / kind
        directory.mkdir(parents=True, exist_ok=True)
        with (directory / f".{key}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def record(self, kind: str, key: str) -> None:
        directory = self.root / kind
        directory.mkdir(parents=True, exist_ok=True)
        temp = directory / f".{key}.{os.getpid()}"
        temp.write_text("passed\n", encoding="utf-8")
        temp.replace(directory / key)
