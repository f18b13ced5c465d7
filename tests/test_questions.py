"""Answers: bad ones are refused with a clear message; free text lands intact."""

from __future__ import annotations

import ast
import html
import keyword
import re
import subprocess
import sys
import tomllib
import unicodedata
from typing import TYPE_CHECKING, Any

import copier
import markdown
import pytest
import yaml
from copier.errors import UserMessageError
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from tests.conftest import copy_on_the_command_line, copy_project
from tests.matrix import PACKAGE, ROOT, registry
from tests.matrix import template as extension

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

LONG_PACKAGE = "long_package_name_ok"  # MAX_PACKAGE_NAME characters
TRICKY = {
    "project_name": 'Café "Ünïcode": #1 {braces} \\ back\\slash *stars* _under_ <tag>',
    "description": "Quotes \"double\" and 'single', colon: yes, # not a comment, {{ not jinja }}, "
    "back\\slash, tab\tand ünïcode — ok",
    "author_name": "Zoë O'Brien-Łukasiewicz, Jr. {#}",
    "author_email": "zoe+test@example.org",
}


copy = copy_project


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"package_name": "sqlite3"}, "would shadow the standard-library module"),
        ({"package_name": "os"}, "would shadow the standard-library module"),
        ({"package_name": "My-Package"}, "must be a lowercase Python identifier"),
        ({"package_name": "Package"}, "must be a lowercase Python identifier"),
        ({"package_name": "1abc"}, "must be a lowercase Python identifier"),
        ({"package_name": "café"}, "must be a lowercase Python identifier"),
        ({"package_name": "class"}, "is a Python keyword"),
        ({"package_name": "match"}, "is a Python keyword"),
        ({"package_name": "_private"}, "must not start with an underscore"),
        ({"package_name": "a" * 21}, "is 21 characters long; at most 20"),
        ({"package_name": "test"}, "is reserved"),
        ({"package_name": "tests"}, "is reserved"),
        ({"package_name": "stress"}, "is reserved"),
        ({"package_name": ""}, "must not be empty"),
        ({"project_name": "   "}, "project_name must not be empty"),
        ({"author_name": ""}, "author_name must not be empty"),
        ({"description": "  "}, "description must not be empty"),
        ({"description": 'a """ b'}, "must not contain three double quotes"),
        ({"author_email": "not-an-address"}, "is not an e-mail address"),
        ({"author_email": "a@b"}, "is not an e-mail address"),
        ({"license": "GPL-3.0"}, "Invalid choice for 'license'"),
        ({"python_min": "3.10"}, "Invalid choice for 'python_min'"),
        ({"copyright_year": "next year"}, "must be a year such as 2025"),
        ({"copyright_year": "25"}, "must be a year such as 2025"),
        ({"copyright_year": "20250"}, "must be a year such as 2025"),
        ({"copyright_year": "2019, 2025"}, "must be a year such as 2025"),
        ({"copyright_year": "2019\u20132025"}, "must be a year such as 2025"),
        ({"copyright_year": "2025-2019"}, "from an earlier year to a later one"),
        ({"copyright_year": "2025-2025"}, "from an earlier year to a later one"),
    ],
    ids=lambda value: str(value) if isinstance(value, dict) else "",
)
def test_bad_answers_are_refused(
    template_snapshot: Path, tmp_path: Path, answers: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        copy(template_snapshot, tmp_path / "out", **answers)
    assert not (tmp_path / "out" / "pyproject.toml").exists()


def test_command_line_refuses_with_the_message(template_snapshot: Path, tmp_path: Path) -> None:
    arguments = ("--data", "package_name=json")
    result = copy_on_the_command_line(template_snapshot, tmp_path / "out", *arguments)
    assert result.returncode != 0
    assert "package_name 'json' would shadow the standard-library module" in result.stderr


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ("sqlite", "must be a YAML list in brackets: --data 'resources=[sqlite]'"),
        ("file, lock", "must be a YAML list in brackets: --data 'resources=[file, lock]'"),
        ("", "must be a YAML list in brackets: --data 'resources=[file, sqlite]'"),
        ("[file", "must be a YAML list in brackets"),
        ("[file, redis]", "resources: 'redis' is not a choice; the choices are file, sqlite,"),
        (["file", "ftp"], "resources: 'ftp' is not a choice"),
        ("[redis, ftp]", "resources: 'redis', 'ftp' are not choices"),
    ],
)
def test_bad_resources_are_refused_before_copier_parses_them(
    template_snapshot: Path, tmp_path: Path, resources: object, message: str
) -> None:
    """Copier's own parsing would raise ``TypeError: Not a YAML list`` or ``ValueError``."""
    with pytest.raises(UserMessageError, match=re.escape(message)):
        copy(template_snapshot, tmp_path / "out", resources=resources)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["--data", "resources=sqlite"],
            "resources must be a YAML list in brackets: --data 'resources=[sqlite]' "
            "(quoted for the shell), or resources: [sqlite] in a --data-file.",
        ),
        (
            ["--data", "resources=[file, redis]"],
            "resources: 'redis' is not a choice; the choices are "
            + ", ".join(r.key for r in registry.RESOURCES[:-1])
            + f" and {registry.RESOURCES[-1].key}.",
        ),
        (["--data-file", "answers.yml"], "resources: [http] in a --data-file."),
    ],
    ids=["bare-word", "unknown-key", "data-file"],
)
def test_command_line_refuses_bad_resources_without_a_traceback(
    template_snapshot: Path, tmp_path: Path, arguments: list[str], message: str
) -> None:
    (tmp_path / "answers.yml").write_text("resources: http\n", encoding="utf-8")
    out = tmp_path / "out"
    result = copy_on_the_command_line(template_snapshot, out, *arguments, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].endswith(message)
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("year", ["2025", "1999", "2019-2025"])
def test_copyright_year_or_range_lands_in_the_license(
    template_snapshot: Path, tmp_path: Path, year: str
) -> None:
    copy(template_snapshot, tmp_path, copyright_year=year, resources=[], docs=False)
    assert f"Copyright (c) {year} " in (tmp_path / "LICENSE").read_text(encoding="utf-8")


def _copy_on_the_command_line(template: Path, destination: Path, *data: str) -> str:
    """Run ``copier copy --defaults`` as a user would; return what it printed."""
    arguments = [arg for item in ("resources=[]", *data) for arg in ("--data", item)]
    result = copy_on_the_command_line(template, destination, *arguments)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def test_placeholder_defaults_are_announced_after_copy(
    template_snapshot: Path, tmp_path: Path
) -> None:
    """``--defaults`` writes the placeholders; the after-copy message names each."""
    questions = yaml.safe_load((ROOT / "copier.yml").read_text(encoding="utf-8"))
    placeholders = extension.PLACEHOLDER_ANSWERS
    assert {name: questions[name]["default"] for name in placeholders} == placeholders
    printed = _copy_on_the_command_line(template_snapshot, tmp_path / "out")
    assert "still the template's placeholders" in printed
    for name, value in placeholders.items():
        assert f"{name}: {value}" in printed
    pyproject = tomllib.loads((tmp_path / "out" / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["authors"][0]["name"] == placeholders["author_name"]


def test_real_answers_get_no_placeholder_notice(template_snapshot: Path, tmp_path: Path) -> None:
    printed = _copy_on_the_command_line(
        template_snapshot,
        tmp_path / "out",
        "description=Keeps files closed.",
        "author_name=Ada Lovelace",
        "author_email=ada@example.org",
    )
    assert "placeholder" not in printed
    assert "Next steps" in printed


def test_package_name_help_states_the_length_limit() -> None:
    questions = yaml.safe_load((ROOT / "copier.yml").read_text(encoding="utf-8"))
    assert f"at most {extension.MAX_PACKAGE_NAME} characters" in questions["package_name"]["help"]


def _plain_derivation(project_name: str) -> str:
    """The default before it was made always valid: ASCII, lowercase, ``_`` between words."""
    ascii_text = unicodedata.normalize("NFKD", project_name).encode("ascii", "ignore").decode()
    name = re.sub(r"[^a-z0-9]+", "_", ascii_text.lower()).strip("_")
    return f"pkg_{name}" if name[:1].isdigit() else name


NAME_WORDS = sorted(
    {"my", "resources", "ada", "lovelace", "s", "2", "x" * 25, "a" * 17, "pkg"}
    | extension.RESERVED_PACKAGE_NAMES
    | set(keyword.kwlist)
    | set(keyword.softkwlist)
    | {name for name in sys.stdlib_module_names if not name.startswith("_")}
)
PROJECT_NAMES = st.one_of(
    st.text(),
    st.lists(st.sampled_from(NAME_WORDS), min_size=1, max_size=8).map(" ".join),
    st.lists(
        st.one_of(st.sampled_from(NAME_WORDS), st.text(max_size=4)), min_size=1, max_size=8
    ).map("-".join),
)
"""Any text; and names made of words that are modules, keywords, reserved or long."""


@settings(max_examples=500, database=None, deadline=None)
@given(PROJECT_NAMES)
@example("Ada Lovelace's Resources")
@example("Resource")
@example("")
@example("_")
@example("🚀🚀")
@example("日本語")
@example("x" * 200)
def test_package_name_default_is_always_valid(project_name: str) -> None:
    """No project name gives a default that the validator refuses.

    Copier validates a default before it shows it: a refused one ended the
    questionnaire with a traceback, before the user could type a package name.
    A default that was valid stays what it was; any other keeps the name's
    first words, at most ``MAX_PACKAGE_NAME`` characters of them, with ``_pkg``
    where the name alone would shadow a module or a reserved name.
    """
    default = extension.to_package_name(project_name)
    assert extension.package_name_problem(default) == ""
    plain = _plain_derivation(project_name)
    if not plain:
        assert default == extension.PACKAGE_NAME_FALLBACK
    elif not extension.package_name_problem(plain):
        assert default == plain
    else:
        kept = default.removesuffix(extension.PACKAGE_NAME_SUFFIX)
        assert plain.startswith(kept)
        first_word = plain.split("_")[0]
        if len(first_word) < len(kept):  # whole words were kept: the cut is at a "_"
            assert plain == kept or plain.startswith(f"{kept}_")


@pytest.mark.parametrize(
    ("project_name", "package_name"),
    [
        ("My Resources", "my_resources"),
        ("Ada Lovelace's Resources", "ada_lovelace_s"),
        ("Resource", "resource_pkg"),
        ("Json", "json_pkg"),
        ("Sqlite3", "sqlite3_pkg"),
        ("Test", "test_pkg"),
        ("Tests", "tests_pkg"),
        ("Stress", "stress_pkg"),
        ("class", "class_pkg"),
        ("Match", "match_pkg"),
        ("123", "pkg_123"),
        ("日本語", "package"),
        ("🚀🚀", "package"),
        ("The Quick Brown Fox Jumps Over", "the_quick_brown_fox"),
        ("Supercalifragilisticexpialidocious", "supercalifragilistic"),
        ("Asyncio Helpers Reloaded Edition", "asyncio_helpers"),
        ("Logging", "logging_pkg"),
        ("Multiprocessing Pool Tools", "multiprocessing_pool"),
    ],
)
def test_package_name_default_examples(project_name: str, package_name: str) -> None:
    assert extension.to_package_name(project_name) == package_name
    assert extension.package_name_problem(package_name) == ""


def test_package_name_fallback_is_valid() -> None:
    assert extension.package_name_problem(extension.PACKAGE_NAME_FALLBACK) == ""


@pytest.mark.parametrize(
    ("project_name", "package_name"),
    [
        ("My Resources", "my_resources"),
        ("Café Déjà-Vu 2", "cafe_deja_vu_2"),
        ("2fast", "pkg_2fast"),
        ("Resource", "resource_pkg"),
        ("Ada Lovelace's Resources", "ada_lovelace_s"),
    ],
)
def test_package_name_default_derives_from_project_name(
    template_snapshot: Path, tmp_path: Path, project_name: str, package_name: str
) -> None:
    copier.run_copy(
        str(template_snapshot),
        tmp_path,
        data={"project_name": project_name, "resources": []},
        defaults=True,
        unsafe=True,
        quiet=True,
    )
    answers = yaml.safe_load((tmp_path / ".copier-answers.yml").read_text(encoding="utf-8"))
    assert answers["package_name"] == package_name
    assert (tmp_path / "src" / package_name / "__init__.py").is_file()


@pytest.fixture(scope="module")
def tricky_project(tmp_path_factory: pytest.TempPathFactory, template_snapshot: Path) -> Path:
    return copy(
        template_snapshot,
        tmp_path_factory.mktemp("tricky"),
        package_name=LONG_PACKAGE,
        resources=[r.key for r in registry.RESOURCES],
        async_support=True,
        docs=True,
        license="BSD-3-Clause",
        **TRICKY,
    )


COMMONMARK = MarkdownIt("commonmark").enable("strikethrough")
"""CommonMark with GitHub's strikethrough: how GitHub and PyPI show a README."""


def _markdown_text(source: str) -> str:
    """What a reader sees of *source*, rendered by Python-Markdown and by CommonMark.

    The docs site renders with Python-Markdown, GitHub and PyPI with CommonMark:
    the two must show the same text.
    """
    shown = {
        html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()
        for rendered in (markdown.markdown(source), COMMONMARK.render(source))
    }
    assert len(shown) == 1, f"{source!r} shows differently: {shown}"
    return shown.pop()


MARKDOWN_TEXTS = [
    TRICKY["project_name"],
    "sqlite & HTTP: safe #1",
    "C#",
    "#1 tool",
    "1. first",
    "2026) release",
    "- dash",
    "---",
    "+ plus",
    "> quote",
    "<b>bold</b> <!-- comment --> <http://example.org>",
    "&amp; &lt; &#35; &#x41; & alone",
    "__init__ _lead trail_",
    "[link](https://example.org) ![image](x.png) a [b] c",
    "`code` and a\\*b",
    "ends with a backslash \\",
    "x ~~struck~~ y",
    "*** and * * *",
]


@pytest.mark.parametrize("text", MARKDOWN_TEXTS)
@pytest.mark.parametrize("prefix", ["", "# "], ids=["paragraph", "heading"])
def test_markdown_text_shows_the_text_in_both_flavours(text: str, prefix: str) -> None:
    assert _markdown_text(prefix + extension.markdown_text(text)) == text


@pytest.mark.parametrize(
    "text",
    [
        "sqlite & HTTP: safe #1",
        "Ada Lovelace's Resources",
        "my_package_name 2.0 (beta), 100% a < b > c; 3 - 1 = 2 {braces}",
        'Café "Ünïcode" — 日本語_テスト, ~tilde, back\\slash, C# and F# tools',
    ],
)
def test_markdown_text_leaves_plain_text_as_a_terminal_reader_expects(text: str) -> None:
    """A README is read raw too: nothing Markdown would leave alone is escaped."""
    assert extension.markdown_text(text) == text


def test_generated_markdown_reads_right_raw(template_snapshot: Path, tmp_path: Path) -> None:
    """The README's first lines as a terminal shows them: no ``&amp;``, no ``\\#``."""
    name, description = "sqlite & HTTP: safe #1", "Closes what it opens: files & sockets."
    copy(
        template_snapshot,
        tmp_path,
        project_name=name,
        description=description,
        package_name=PACKAGE,
        resources=[],
        docs=True,
    )
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert readme.startswith(f"# {name}\n\n{description}\n")
    index = (tmp_path / "docs" / "index.md").read_text(encoding="utf-8")
    assert index.startswith(f"# {name}\n\n{description}\n")
    contributing = (tmp_path / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert contributing.startswith(f"# Contributing to {name}\n")


def test_free_text_lands_intact_in_toml(tricky_project: Path) -> None:
    project = tomllib.loads((tricky_project / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"
    ]
    assert project["description"] == TRICKY["description"]
    assert project["authors"] == [{"name": TRICKY["author_name"], "email": TRICKY["author_email"]}]


def test_free_text_lands_intact_in_yaml(tricky_project: Path) -> None:
    config = yaml.safe_load((tricky_project / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["site_name"] == TRICKY["project_name"]
    assert config["site_description"] == TRICKY["description"]
    assert config["site_author"] == TRICKY["author_name"]
    answers = yaml.safe_load((tricky_project / ".copier-answers.yml").read_text(encoding="utf-8"))
    assert {key: answers[key] for key in TRICKY} == TRICKY


def test_free_text_lands_intact_in_python(tricky_project: Path) -> None:
    init = tricky_project / "src" / LONG_PACKAGE / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert docstring is not None
    summary, _, body = docstring.partition("\n\n")
    assert summary == f"The {LONG_PACKAGE} package."
    assert " ".join(body.split()) == " ".join(TRICKY["description"].split())


def test_free_text_lands_intact_in_markdown(tricky_project: Path) -> None:
    readme = (tricky_project / "README.md").read_text(encoding="utf-8").split("\n\n")
    assert _markdown_text(readme[0]) == TRICKY["project_name"]
    assert _markdown_text(readme[1]) == " ".join(TRICKY["description"].split())
    index = (tricky_project / "docs" / "index.md").read_text(encoding="utf-8").split("\n\n")
    assert _markdown_text(index[0]) == TRICKY["project_name"]


def test_free_text_lands_intact_in_license(tricky_project: Path) -> None:
    assert f", {TRICKY['author_name']}\n" in (tricky_project / "LICENSE").read_text(
        encoding="utf-8"
    )


@pytest.mark.slow
def test_shortest_package_name_passes_lint(
    tmp_path: Path,
    template_snapshot: Path,
    run_tool: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    # The matrix renders one name; a line that fits 88 columns only with a short
    # one is joined by the formatter, so `ruff format --check` fails there alone.
    project = copy(
        template_snapshot,
        tmp_path,
        package_name="p",
        resources=[r.key for r in registry.RESOURCES],
        async_support=True,
        docs=True,
    )
    run_tool(project, "ruff", "check", "--no-cache", ".")
    run_tool(project, "ruff", "format", "--no-cache", "--check", ".")


@pytest.mark.slow
def test_tricky_project_passes_lint_and_types(
    tricky_project: Path, run_tool: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    run_tool(tricky_project, "ruff", "check", "--no-cache", ".")
    run_tool(tricky_project, "ruff", "format", "--no-cache", "--check", ".")
    run_tool(tricky_project, "mypy")
    run_tool(
        tricky_project,
        "python",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_package.py",
    )
