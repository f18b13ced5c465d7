"""Rendering every combination: Copier once per base, then its own environment per file.

A combination of the matrix differs from its *base* (the combination with the same
``license`` and ``python_min``) only in ``resources``, ``async_support`` and
``docs``.  ``copier copy`` renders the base, and a Jinja extension of the harness
(``CaptureRenderContext``, added to the copier.yml of the harness's copy of the
template, through copier's documented ``_jinja_extensions``) records the
environment Copier built and the context it rendered with.  Every other
combination of that base is then rendered file by file with that environment and
that context, its three answers replaced and the template's own context hook run
again (``TemplateRenderer``), the way Copier renders: each part of a file's path,
its ``.jinja`` suffix dropped, a path with an empty part skipped, the content of a
``.jinja`` file rendered and of any other file copied, its mode the source's.

Each file's path and text are kept under the values of the variables it reads
(``FileRecipe.key``): a template is a function of those values, so a combination
that gives them the same values gets the same file.  Two refinements make most
files shared between combinations: ``resources`` is read through its questions
only (``'file' in resources`` and whether it is empty are all that most files
ask, so a file is keyed by the answers to those questions), and a variable that
no answer of the base changes is left out.  The premise has three conditions,
checked when a recipe is made: no ``include``, ``import`` or ``extends`` (a file
reads only its own source), and no filter or test that receives the context
(which could read any variable).

The premise is proven on every run: ``tests/test_harness.py`` renders a rotating
sample of combinations with ``copier copy`` and compares every file, byte for byte
and mode for mode, with this renderer's; and it plants templates that read
``resources`` in each other way, which must be keyed by the whole list.

Nothing here reaches into Copier: the renderer uses its public ``run_copy`` and
copier-template-extensions' ``ContextHook``, and Jinja's public API.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import jinja2.filters
import jinja2.meta
import jinja2.nodes
import yaml
from copier_template_extensions import ContextHook

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

CAPTURE = "tests.rendering:CaptureRenderContext"
"""How the harness's copy of ``copier.yml`` names the capturing extension."""
VARYING_ANSWERS = ("resources", "async_support", "docs")
"""The answers in which the combinations of one base differ."""
TEMPLATE_SUFFIX = ".jinja"
MEMO_PER_FILE = 64
"""Variants of one file kept at most: a file that reads the whole list of resources
has one per combination, and only the docs twin, rendered next, uses it again."""
_MISSING: Any = object()


class CaptureRenderContext(ContextHook):
    """Record the environment Copier renders with, and its render context.

    It sees the context as the template's own hook (``ResourceContext``) left it;
    ``TemplateRenderer`` runs that hook again for every combination, which writes
    each of its values anew.
    """

    def hook(self, context: dict[str, Any]) -> None:
        if context.get("_copier_phase") == "render":
            CAPTURED[id(self.environment)] = (self.environment, dict(context))


CAPTURED: dict[int, tuple[jinja2.Environment, dict[str, Any]]] = {}
"""The last render context of each environment made in this process."""


def add_capture(template: Path) -> None:
    """Make the template copy at *template* record its render context when copied."""
    config_path = template / "copier.yml"
    config = config_path.read_text(encoding="utf-8")
    marker = "_jinja_extensions:\n"
    if marker not in config:
        raise AssertionError("copier.yml has no _jinja_extensions list to extend")
    config_path.write_text(config.replace(marker, f"{marker}  - {CAPTURE}\n", 1), "utf-8")


@dataclass(frozen=True)
class FileRecipe:
    """How one template file becomes a file of a project, and what it depends on."""

    source: str  # relative to the template folder (copier.yml's _subdirectory)
    path_parts: tuple[jinja2.Template, ...]
    content: jinja2.Template | None  # None: copied as it is
    raw: bytes
    mode: int
    variables: frozenset[str]
    resource_questions: tuple[str, ...] | None  # None: the whole list

    def key(self, context: Mapping[str, Any], reads: tuple[str, ...]) -> tuple[Any, ...]:
        """The values of *reads*, the variables it reads that may differ within a base."""
        parts: list[Any] = []
        for name in reads:
            value = context.get(name)
            if name == "resources" and self.resource_questions is not None:
                parts.append((name, tuple(_answer(q, value) for q in self.resource_questions)))
            else:
                parts.append((name, _frozen(value)))
        return tuple(parts)


def _answer(question: str, resources: Any) -> bool:
    return bool(resources) if question == "" else question in resources


def _frozen(value: Any) -> Any:
    """*value* as something hashable that is equal only where the value is."""
    if isinstance(value, (str, bytes, int, float, bool, type(None))):
        return (type(value).__name__, value)
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(_frozen(item) for item in value))
    if isinstance(value, dict):
        return ("map", tuple((key, _frozen(item)) for key, item in value.items()))
    try:
        hash(value)
    except TypeError:
        return ("unique", object())  # never equal: the file is rendered every time
    return ("object", value)


def resource_questions(tree: jinja2.nodes.Node) -> tuple[str, ...] | None:
    """The questions a template asks of ``resources``, or None if it reads it otherwise.

    ``'KEY' in resources`` asks whether KEY was chosen; ``resources`` where only its
    truth counts (the condition of an ``if`` or ``x if c else y``, under ``not``,
    or under ``and``/``or`` that are themselves such a condition) whether any was
    (the question ``""``).  Any other use reads the whole list.
    """
    questions: set[str] = set()

    def asked(node: jinja2.nodes.Node, parent: Any, grandparent: Any, truth: bool) -> bool:
        if isinstance(node, jinja2.nodes.Name) and node.name == "resources":
            if (
                isinstance(parent, jinja2.nodes.Operand)
                and parent.op == "in"
                and isinstance(grandparent, jinja2.nodes.Compare)
                and len(grandparent.ops) == 1
                and isinstance(grandparent.expr, jinja2.nodes.Const)
                and isinstance(grandparent.expr.value, str)
            ):
                questions.add(grandparent.expr.value)
                return True
            if truth:
                questions.add("")
                return True
            return False
        for child in node.iter_child_nodes():
            if isinstance(node, (jinja2.nodes.If, jinja2.nodes.CondExpr)):
                child_truth = child is node.test
            elif isinstance(node, jinja2.nodes.Not):
                child_truth = True
            elif isinstance(node, (jinja2.nodes.And, jinja2.nodes.Or)):
                child_truth = truth
            else:
                child_truth = False
            if not asked(child, node, parent, child_truth):
                return False
        return True

    return tuple(sorted(questions)) if asked(tree, None, None, False) else None


_CONTEXT_MARKER = jinja2.pass_context(lambda context: context).jinja_pass_arg  # type: ignore[attr-defined]
"""What ``jinja_pass_arg`` holds on a filter or test that receives the context."""


def source_problems(env: jinja2.Environment, tree: jinja2.nodes.Template) -> list[str]:
    """Why a template's output could depend on more than the variables it names.

    Jinja's own ``map``, ``select``, ``reject``, ``selectattr`` and ``rejectattr``
    receive the context only to apply the filter or test they are given by name:
    they are sound when no name they are given is that of one that receives it.
    """
    problems = []
    if list(jinja2.meta.find_referenced_templates(tree)):
        problems.append("includes, imports or extends another template")
    for node in tree.find_all((jinja2.nodes.Filter, jinja2.nodes.Test)):
        table = env.filters if isinstance(node, jinja2.nodes.Filter) else env.tests
        function = table.get(node.name)
        if getattr(function, "jinja_pass_arg", None) is not _CONTEXT_MARKER:
            continue
        if function is not jinja2.filters.FILTERS.get(node.name) or node.name not in _APPLIERS:
            problems.append(f"{node.name} receives the context")
            continue
        for argument in node.args:
            named = argument.value if isinstance(argument, jinja2.nodes.Const) else None
            applied = env.filters.get(named) or env.tests.get(named)  # type: ignore[arg-type]
            if getattr(applied, "jinja_pass_arg", None) is _CONTEXT_MARKER:
                problems.append(f"{node.name}({named!r}) receives the context")
    return problems


_APPLIERS = frozenset({"map", "select", "reject", "selectattr", "rejectattr"})


class TemplateRenderer:
    """Render any combination of one base with the environment Copier used for it."""

    def __init__(
        self, template: Path, base_answers: dict[str, Any], copy: Callable[[dict[str, Any]], Path]
    ) -> None:
        """Render the base with *copy* (``copier copy`` of *template*) and keep its context."""
        self.template = template
        settings = yaml.safe_load((template / "copier.yml").read_text(encoding="utf-8"))
        self.subdirectory = template / settings.get("_subdirectory", "")
        self.excluded = tuple(settings.get("_exclude", ()))
        CAPTURED.clear()
        self.base_project = copy(base_answers)
        if len(CAPTURED) != 1:
            raise AssertionError(
                f"{CAPTURE} recorded {len(CAPTURED)} environments, not one: is it "
                "in the copy's copier.yml, and does copier still run its hooks?"
            )
        ((self.env, self.base_context),) = CAPTURED.values()
        CAPTURED.clear()
        self.hooks = [
            extension
            for extension in self.env.extensions.values()
            if isinstance(extension, ContextHook)
            and not isinstance(extension, CaptureRenderContext)
        ]
        self.base_answers = dict(base_answers)
        self.varying = self._varying_names()
        self.recipes = [self._recipe(path) for path in self._sources()]
        self._reads = [tuple(sorted(recipe.variables & self.varying)) for recipe in self.recipes]
        self._memo: list[dict[tuple[Any, ...], tuple[str, bytes, int] | None]] = [
            {} for _ in self.recipes
        ]

    def _sources(self) -> Iterator[Path]:
        for path in sorted(self.subdirectory.rglob("*")):
            if path.is_file():
                yield path

    def _varying_names(self) -> frozenset[str]:
        """The context's names whose values an answer of ``VARYING_ANSWERS`` changes.

        The answers themselves, their record (``_copier_answers``), and every name
        the template's hooks write, which they compute from the answers.
        """
        written: set[str] = set()

        class Recording(dict[str, Any]):
            def __setitem__(self, name: str, value: Any) -> None:
                written.add(name)
                super().__setitem__(name, value)

            def update(self, *args: Any, **kwargs: Any) -> None:
                for name, value in dict(*args, **kwargs).items():
                    self[name] = value

            def setdefault(self, name: str, value: Any = None) -> Any:
                written.add(name)
                return super().setdefault(name, value)

        context = Recording(self.base_context)
        for hook in self.hooks:
            hook.hook(context)
        return frozenset({*VARYING_ANSWERS, "_copier_answers", *written})

    def _recipe(self, path: Path) -> FileRecipe:
        relative = path.relative_to(self.subdirectory).as_posix()
        is_template = relative.endswith(TEMPLATE_SUFFIX)
        raw = path.read_bytes()
        target = relative[: -len(TEMPLATE_SUFFIX)] if is_template else relative
        sources = [*target.split("/")]
        text = "\n".join(sources)
        if is_template:
            text += "\n" + raw.decode("utf-8")
        tree = self.env.parse(text)
        problems = source_problems(self.env, tree)
        if problems:
            raise AssertionError(f"{relative}: {'; '.join(problems)}: keyed renders unsound")
        name = (Path(self.subdirectory.name) / relative).as_posix()
        return FileRecipe(
            source=relative,
            path_parts=tuple(self.env.from_string(part) for part in sources),
            content=self.env.get_template(name) if is_template else None,
            raw=raw,
            mode=stat.S_IMODE(path.stat().st_mode),
            variables=frozenset(jinja2.meta.find_undeclared_variables(tree)),
            resource_questions=resource_questions(tree),
        )

    def context(self, answers: Mapping[str, Any]) -> dict[str, Any]:
        """The render context of the combination with these *answers* to VARYING_ANSWERS."""
        context = dict(self.base_context)
        recorded = dict(context["_copier_answers"])
        for name in VARYING_ANSWERS:
            context[name] = answers[name]
            recorded[name] = answers[name]
        context["_copier_answers"] = recorded
        for hook in self.hooks:
            hook.hook(context)
        return context

    def files(self, answers: Mapping[str, Any]) -> dict[str, tuple[bytes, int]]:
        """Every file of the combination: its path, bytes and permission bits."""
        for name, value in self.base_answers.items():
            if name not in VARYING_ANSWERS and answers.get(name, value) != value:
                raise AssertionError(f"{name}={answers[name]!r} is not this base's")
        context = self.context(answers)
        files: dict[str, tuple[bytes, int]] = {}
        for recipe, reads, memo in zip(self.recipes, self._reads, self._memo, strict=True):
            key = recipe.key(context, reads)
            made = memo.get(key, _MISSING)
            if made is _MISSING:
                made = self._render(recipe, context)
                if len(memo) >= MEMO_PER_FILE:  # a file that reads the whole list
                    del memo[next(iter(memo))]
                memo[key] = made
            if made is not None:
                path, data, mode = made
                files[path] = (data, mode)
        return files

    def _render(self, recipe: FileRecipe, context: dict[str, Any]) -> tuple[str, bytes, int] | None:
        parts = [part.render(context) for part in recipe.path_parts]
        if not all(parts):
            return None
        path = "/".join(parts)
        if self._excluded(path):
            return None
        data = recipe.raw if recipe.content is None else recipe.content.render(context).encode()
        return path, data, recipe.mode

    def _excluded(self, path: str) -> bool:
        """Whether one of ``_exclude``'s patterns (all of them names) matches a part."""
        return any(
            fnmatch.fnmatchcase(part, pattern)
            for pattern in self.excluded
            for part in path.split("/")
        )


class ProjectFolder:
    """One folder that holds one combination at a time, rewritten file by file.

    Writing only the files that differ from the combination before keeps the
    unchanged ones' modification times, which mypy's cache reads (a changed file
    gets a time of its own: ``give_distinct_mtimes``).  A file a check changed in
    the folder is noticed by its size and modification time, and written again.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._written: dict[str, tuple[bytes, int, int, int]] = {}

    def hold(self, files: Mapping[str, tuple[bytes, int]]) -> Path:
        for name in sorted(set(self._written) - set(files)):
            (self.path / name).unlink(missing_ok=True)
            del self._written[name]
        self._remove_strays(files)
        for name, (data, mode) in files.items():
            target = self.path / name
            written = self._written.get(name)
            if (
                written is not None
                and written[:2] == (data, mode)
                and self._unchanged(target, written)
            ):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(mode)
            status = target.stat()
            self._written[name] = (data, mode, status.st_size, status.st_mtime_ns)
        return self.path

    @staticmethod
    def _unchanged(target: Path, written: tuple[bytes, int, int, int]) -> bool:
        try:
            status = target.stat()
        except FileNotFoundError:
            return False
        return (status.st_size, status.st_mtime_ns) == written[2:]

    def _remove_strays(self, files: Mapping[str, tuple[bytes, int]]) -> None:
        """Delete what no combination wrote (a check's output) and emptied folders."""
        if not self.path.exists():
            return
        folders = {""} | {
            "/".join(name.split("/")[:depth])
            for name in files
            for depth in range(1, name.count("/") + 1)
        }
        for root, dirs, names in os.walk(self.path, topdown=False):
            relative = Path(root).relative_to(self.path).as_posix()
            relative = "" if relative == "." else relative
            for name in names:
                path = f"{relative}/{name}" if relative else name
                if path not in files:
                    (Path(root) / name).unlink()
            for name in dirs:
                path = f"{relative}/{name}" if relative else name
                if path not in folders and not any((Path(root) / name).iterdir()):
                    (Path(root) / name).rmdir()


def digest_of_tree(files: Mapping[str, tuple[bytes, int]]) -> str:
    hasher = hashlib.sha256()
    for name in sorted(files):
        data, mode = files[name]
        hasher.update(f"{name}\0{mode}\0{len(data)}\0".encode())
        hasher.update(data)
    return hasher.hexdigest()


def tree_of(project: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of *project*: its bytes and its permission bits."""
    return {
        path.relative_to(project).as_posix(): (path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
        for path in sorted(project.rglob("*"))
        if path.is_file()
    }
