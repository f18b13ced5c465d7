"""Copier extensions of this template: the resource context and naming filters.

``copier.yml`` loads both classes through ``copier_template_extensions``; every value
that is computed from the answers is computed here, never in ``copier.yml``.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import keyword
import os
import re
import sys
import textwrap
import unicodedata
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path
from types import ModuleType
from typing import Any

from copier.errors import UserMessageError
from copier_template_extensions import ContextHook
from jinja2 import Environment
from jinja2.ext import Extension


def _load(path: Path, kind: str) -> ModuleType:
    """Execute the Python file *path* of the template, every time this module is loaded.

    There is deliberately no cache: ``copier update`` renders the old and the new
    template version in one process, and each render must use its own files.  The
    module is still registered in ``sys.modules`` while it runs (dataclasses look up
    ``sys.modules[cls.__module__]``), under a name unique to the file's path and bytes.
    """
    path = path.resolve()
    digest = hashlib.sha256(str(path).encode() + b"\0" + path.read_bytes()).hexdigest()[:16]
    name = f"copier_template_extensions.{kind}_{digest}"
    spec = spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the {kind} from {path}")
    module = module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


registry = _load(Path(__file__).with_name("registry.py"), "resource_registry")
_RUNTIME = Path(__file__).parent.parent / "template/src/{{ package_name }}" / registry.RUNTIME
leftovers = _load(_RUNTIME / "leftovers.py", "update_leftovers")
"""The generated runtime's scanner, which the project's own test runs too."""

MAX_PACKAGE_NAME = 20
RESERVED_PACKAGE_NAMES = frozenset({"test", "tests", "src", "docs", "setup", "site", "stress"})
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_MARKDOWN_ENTITY = re.compile(r"&(?=#[0-9]+;|#[xX][0-9a-fA-F]+;|[A-Za-z][A-Za-z0-9]*;)")
_MARKDOWN_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_MARKDOWN_LINE_START = re.compile(r"^(\d+)([.)])(?= |$)|^([-+](?= |$)|-(?=[- ]*$)|[>#])")
_MARKDOWN_CLOSING_HASHES = re.compile(r"#+$")
_TOML_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def package_name_problem(name: object) -> str:
    """Return why ``name`` cannot be the import name of the package, or ``""``."""
    if not isinstance(name, str) or not name:
        return "package_name must not be empty."
    if not name.isidentifier() or not name.isascii() or name != name.lower():
        return (
            f"package_name {name!r} must be a lowercase Python identifier: ASCII letters, "
            "digits and underscores, not starting with a digit."
        )
    if len(name) > MAX_PACKAGE_NAME:
        return (
            f"package_name {name!r} is {len(name)} characters long; at most {MAX_PACKAGE_NAME} "
            "keep the generated imports within the 88-column line length."
        )
    if name.startswith("_"):
        return (
            f"package_name {name!r} must not start with an underscore (that marks private modules)."
        )
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"package_name {name!r} is a Python keyword."
    if name in sys.stdlib_module_names:
        return f"package_name {name!r} would shadow the standard-library module of the same name."
    if name in RESERVED_PACKAGE_NAMES:
        return f"package_name {name!r} is reserved for project folders; choose a distinctive name."
    return ""


def email_problem(address: object) -> str:
    """Return why ``address`` is not a plausible e-mail address, or ``""``."""
    text = str(address)
    if not re.fullmatch(r"[^@\s\"<>,;]+@[^@\s\"<>,;]+\.[^@\s\"<>,;.]+", text):
        return f"author_email {text!r} is not an e-mail address like name@example.com."
    return ""


def copyright_year_problem(value: object) -> str:
    """Return why ``value`` is not a year (``2025``) or a range of years (``2019-2025``)."""
    text = str(value).strip()
    match = re.fullmatch(r"([1-9]\d{3})(?:-([1-9]\d{3}))?", text)
    if match is None:
        return (
            f"copyright_year {text!r} must be a year such as 2025 "
            "or a range of years such as 2019-2025."
        )
    if match[2] is not None and int(match[1]) >= int(match[2]):
        return f"copyright_year {text!r}: the range must run from an earlier year to a later one."
    return ""


PLACEHOLDER_ANSWERS = {
    "description": "Context managers that release every resource they open.",
    "author_name": "Your Name",
    "author_email": "you@example.com",
}
"""Defaults of ``copier.yml`` that only hold a place: ``--defaults`` accepts them."""


PACKAGE_NAME_FALLBACK = "package"
"""The default ``package_name`` of a project name with no ASCII letter or digit."""
PACKAGE_NAME_SUFFIX = "_pkg"
"""Added to a default ``package_name`` that would shadow a module or a reserved name."""


def _shortened(name: str, limit: int) -> str:
    """*name* cut to at most *limit* characters, at an underscore where one fits.

    Whole words are kept while they fit; only a first word longer than *limit* is
    cut in the middle.  No underscore is left at the end.
    """
    if len(name) <= limit:
        return name
    head = name[: limit + 1]
    cut = head.rfind("_")
    return (name[:cut] if cut > 0 else name[:limit]).rstrip("_")


def to_package_name(project_name: object) -> str:
    """Derive the default import name from a free-text project name: always a valid one.

    Accents are dropped, the text is lowercased and every run of other characters
    becomes ``_``.  A name left without ASCII letters or digits becomes
    ``package``; a leading digit gets a ``pkg_`` prefix; a name longer than
    ``MAX_PACKAGE_NAME`` is shortened at a word boundary; and a name that
    ``package_name_problem`` refuses as it stands (a standard-library module, a
    keyword, a reserved folder name) gets the ``_pkg`` suffix.  So the default
    passes the question's validator, whatever the project name is: Copier validates
    a default before it shows it, and a default it refuses ends the questionnaire
    with a traceback.
    """
    ascii_text = unicodedata.normalize("NFKD", str(project_name)).encode("ascii", "ignore").decode()
    name = re.sub(r"[^a-z0-9]+", "_", ascii_text.lower()).strip("_")
    if not name:
        return PACKAGE_NAME_FALLBACK
    if name[0].isdigit():
        name = f"pkg_{name}"
    name = _shortened(name, MAX_PACKAGE_NAME)
    if package_name_problem(name):
        name = _shortened(name, MAX_PACKAGE_NAME - len(PACKAGE_NAME_SUFFIX)) + PACKAGE_NAME_SUFFIX
    return name


def resources_answer_problem(value: object) -> str:
    """Return why *value*, given for ``resources`` with ``--data``, is refused, or ``""``.

    Copier parses a ``--data`` answer of a multiselect question before any
    validator sees it, and a bare word or an unknown key ends in its own
    traceback (``TypeError: Not a YAML list``, ``ValueError: Invalid choice``).
    The template checks the answer first, from ``_copier_conf.data``, so that the
    user reads what to type instead.
    """
    import yaml  # Copier's own dependency

    keys = [resource.key for resource in registry.RESOURCES]
    items = value
    if isinstance(value, str):
        try:
            items = yaml.safe_load(value)
        except yaml.YAMLError:
            items = None
    if not isinstance(items, list):
        words = str(value).strip() if isinstance(value, str) else ""
        listed = f"[{words}]" if re.fullmatch(r"[\w\s,-]+", words) else "[file, sqlite]"
        return (
            f"resources must be a YAML list in brackets: --data 'resources={listed}' "
            f"(quoted for the shell), or resources: {listed} in a --data-file."
        )
    unknown = [item for item in items if not isinstance(item, str) or item not in keys]
    if unknown:
        names = ", ".join(repr(item) for item in unknown)
        verb = "is not a choice" if len(unknown) == 1 else "are not choices"
        return f"resources: {names} {verb}; the choices are {', '.join(keys[:-1])} and {keys[-1]}."
    return ""


def toml_string(value: object) -> str:
    """Quote ``value`` as a TOML basic string."""
    out = []
    for char in str(value):
        if char in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def yaml_string(value: object) -> str:
    """Quote ``value`` as a YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(str(value), ensure_ascii=False)


def python_string(value: object) -> str:
    """Quote ``value`` as a Python string literal in double quotes."""
    return json.dumps(str(value), ensure_ascii=False)


def docstring_literal(body: object, summary: str, width: int = 88) -> str:
    """Build a module docstring literal: *summary*, a blank line, *body* wrapped.

    The text is kept as it is: a docstring with a backslash becomes a raw string
    (ruff's D301), and quotes need no escaping in a triple-quoted string because
    ``description_problem`` refuses three double quotes in a row.
    """
    text = " ".join(str(body).split())
    lines = textwrap.wrap(text, width=width, break_on_hyphens=False, break_long_words=False)
    prefix = "r" if "\\" in summary + text else ""
    return f'{prefix}"""{summary}\n\n' + "\n".join(lines) + '\n"""'


def description_problem(description: object) -> str:
    """Return why *description* cannot be used, or ``""``."""
    text = str(description)
    if not text.strip():
        return "description must not be empty."
    if '"""' in text:
        return (
            "description must not contain three double quotes in a row: "
            "it becomes the package's docstring."
        )
    return ""


def markdown_text(value: object) -> str:
    """Escape ``value`` so Markdown shows it literally, on one line, and raw text reads it.

    A README is read raw in a terminal as often as rendered, so only what Markdown
    would take for markup is escaped, where it would: a backslash before ASCII
    punctuation or at the end, backticks and ``*`` always, ``_`` except inside a word (where
    neither CommonMark nor Python-Markdown emphasises), ``[`` that a ``]`` follows
    (a link), ``#``, ``>``, ``-``, ``+`` and ``1.`` where the line starts (a heading,
    a quote, a list, a rule) and ``#`` at its end (a heading's closing hashes);
    ``&`` only before what reads as an entity (``&amp;``), ``<`` only before what
    reads as a tag (``&lt;``), ``~`` only where two could strike text through
    (``&#126;``).  ``sqlite & HTTP: safe #1`` stays as it is.  Every backslash
    escape is one that both CommonMark (GitHub, PyPI) and Python-Markdown (the docs
    site) honour.
    """
    text = " ".join(str(value).split())
    out = []
    for index, char in enumerate(text):
        before = text[index - 1] if index else " "
        after = text[index + 1] if index + 1 < len(text) else ""
        if (
            (char == "\\" and (after in _ASCII_PUNCTUATION or not after))
            or char in "`*"
            or (char == "_" and not (before.isalnum() and after.isalnum()))
            or (char == "[" and "]" in text[index:])
        ):
            out.append("\\")
        out.append(char)
    text = "".join(out)
    text = _MARKDOWN_ENTITY.sub("&amp;", text)
    text = _MARKDOWN_TAG.sub("&lt;", text)
    text = _MARKDOWN_CLOSING_HASHES.sub(lambda m: "\\#" * len(m[0]), text)
    if text.count("~") > 1:  # GitHub's strikethrough; Python-Markdown keeps "\~"
        text = text.replace("~", "&#126;")
    return _MARKDOWN_LINE_START.sub(lambda m: f"{m[1]}\\{m[2]}" if m[1] else f"\\{m[3]}", text)


def markdown_code(value: object) -> str:
    """Render ``value`` as inline code (names only: no backticks inside)."""
    return f"`{value}`"


def pep503_name(value: object) -> str:
    """Normalise a distribution name as PEP 503 does."""
    return re.sub(r"[-_.]+", "-", str(value)).lower()


_URL_LIKE = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:|[^/\s]+@[^/\s]+:)")
"""A URL (``https://``, ``file://``, ``gh:``, ``gl:``) or scp-like ``git@host:path``."""


def relative_source_problem(src_path: object) -> str:
    """Return why copier cannot update a project copied from *src_path*, or ``""``.

    Copier records the source exactly as it was typed (``_src_path`` in the answers
    file); a relative path is resolved against whatever folder ``copier update`` is
    later run from, and the update stops ("only supported in git-tracked templates").
    """
    text = str(src_path or "")
    if not text or os.path.isabs(text) or text.startswith("~") or _URL_LIKE.match(text):
        return ""
    absolute = os.path.abspath(text)
    return (
        f"The template source {text!r} is a relative path. Copier records it as typed in "
        "the answers file, and a later `copier update` could not find the template again. "
        f"Give an absolute path (here: {absolute!r}) or a git URL instead."
    )


def renamed_package_problem(name: object, project: object, answers_file: object) -> str:
    """Refuse a ``package_name`` other than the one the project's answers record.

    An update would render the package under the new name and delete the old
    one, with every line added to it.  A new project records none: ``""``.
    """
    import yaml  # Copier's own dependency

    try:
        text = (Path(str(project)) / str(answers_file)).read_text(encoding="utf-8")
        recorded = yaml.safe_load(text)
    except (OSError, yaml.YAMLError):
        return ""
    old = recorded.get("package_name") if isinstance(recorded, dict) else None
    if not isinstance(old, str) or old == name:
        return ""
    return (
        f"package_name was {old!r} when this project was generated: an update to "
        f"{name!r} would delete src/{old}/ with the code you added to it. To rename the "
        f"package, move it yourself (git mv src/{old} src/{name}, then fix the imports), "
        f"set package_name: {name} in {answers_file}, commit, and update again."
    )


def update_deletions(project: object) -> list[str]:
    """Files that the update deleted from *project*, as git sees them, sorted.

    The update starts from a clean tree, so a deletion not yet committed is the
    update's: a file of a resource, or of the docs, that the answers no longer
    generate, or one the template no longer has.  Copier deletes such a file even
    if you edited it.  Used by ``_message_after_update``; runs ``git status``,
    which reads.
    """
    import subprocess

    try:
        status = subprocess.run(
            ["git", "status", "--porcelain=v1", "-z", "--no-renames"],
            cwd=str(project),
            capture_output=True,
            check=True,
        ).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.CalledProcessError):
        return []
    entries = [entry for entry in status.split("\0") if len(entry) > 3]
    return sorted(entry[3:] for entry in entries if "D" in entry[:2])


def update_leftovers(project: object) -> list[str]:
    """Files of *project* that an update left unresolved, in the project's order.

    That is every file with conflict markers (a ``<<<<<<<`` line and a ``>>>>>>>``
    line) and every ``*.rej`` or ``*.orig`` file, as the project's
    ``tests/test_update_leftovers.py`` finds them (``_runtime/leftovers.py``).
    Used by ``_message_after_update``; reads, never writes.
    """
    found: list[str] = list(leftovers.leftovers(Path(str(project))))
    return found


class NamingFilters(Extension):
    """Jinja filters for names and for quoting free text in each output format."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        environment.filters.update(
            package_name_problem=package_name_problem,
            renamed_package_problem=renamed_package_problem,
            email_problem=email_problem,
            copyright_year_problem=copyright_year_problem,
            to_package_name=to_package_name,
            toml_string=toml_string,
            yaml_string=yaml_string,
            python_string=python_string,
            docstring_literal=docstring_literal,
            description_problem=description_problem,
            markdown_text=markdown_text,
            markdown_code=markdown_code,
            pep503_name=pep503_name,
        )
        environment.globals["current_year"] = lambda: str(datetime.date.today().year)
        # The ``resources`` question's choices, rendered by copier.yml: (label, value)
        # pairs in registry order (``tojson`` would sort the keys of a mapping).
        environment.globals["resource_choices"] = [
            [resource.title, resource.key] for resource in registry.RESOURCES
        ]


class ResourceContext(ContextHook):
    """Add the chosen resources, as registry entries, and derived names to the context."""

    def hook(self, context: dict[str, Any]) -> None:
        recorded = context.get("_copier_answers") or {}
        problem = relative_source_problem(recorded.get("_src_path"))
        if problem:
            raise UserMessageError(problem)
        conf = context.get("_copier_conf") or {}
        given = conf.get("data") or {}
        if "resources" in given:
            problem = resources_answer_problem(given["resources"])
            if problem:
                raise UserMessageError(problem)
        context["update_leftovers"] = lambda: update_leftovers(conf["dst_path"])
        context["update_deletions"] = lambda: update_deletions(conf["dst_path"])
        chosen = context.get("resources") or []
        if isinstance(chosen, str):
            chosen = [chosen]
        async_support = bool(context.get("async_support"))
        selected = [resource for resource in registry.RESOURCES if resource.key in chosen]
        context["registry"] = registry.RESOURCES
        context["selected_resources"] = selected
        context["benchmark_servers"] = [r.benchmark_server for r in selected if r.benchmark_server]
        context["async_classes"] = async_support and any(r.async_exports for r in selected)
        context["public_names"] = [
            name for resource in selected for name in resource.names(async_support=async_support)
        ]
        context["placeholder_answers"] = [
            name for name, value in PLACEHOLDER_ANSWERS.items() if context.get(name) == value
        ]
        package_name = context.get("package_name") or ""
        context["distribution_name"] = pep503_name(package_name)
        python_min = str(context.get("python_min") or "3.11")
        minor = int(python_min.split(".")[1])
        context["python_versions"] = [f"3.{m}" for m in range(minor, 15)]
        context["ruff_target"] = f"py3{minor}"
