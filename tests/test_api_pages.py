"""The generated API pages show the public API as a reader can use it.

mkdocstrings writes each signature and, where asked, each class's bases from the
source.  This test builds the site of the project with every resource and the
async variants, and reads every signature and every "Bases:" line as a browser
shows it: no private name (a ``_T`` type variable, a ``_NamedLock`` mixin, a
``_thread`` module), no quoted forward reference (``AsyncResource['X']``), and
bases only where they say what catches an error (the errors and leak-testing
pages).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from tests.conftest import copy_project
from tests.matrix import registry
from tests.test_docs_escaping import Element, parse

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path

pytestmark = pytest.mark.slow

PRIVATE = re.compile(r"(?<![\w.])_[A-Za-z]\w*")
QUOTED_TYPE = re.compile(r"\[\s*['\"]|['\"]\s*\]")
"""A string as a type argument: ``X['Y']``. ``Literal['r', 'w']`` is a value, not one."""


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory,
    template_snapshot: Path,
    run_tool: Callable[..., subprocess.CompletedProcess[str]],
) -> Path:
    project = tmp_path_factory.mktemp("api")
    every = [resource.key for resource in registry.RESOURCES]
    copy_project(template_snapshot, project, resources=every, async_support=True, docs=True)
    run_tool(project, "zensical", "build", "--strict")
    return project / "site"


def _api_pages(site: Path) -> dict[str, Element]:
    pages = {
        page.parent.relative_to(site).as_posix(): parse(page)
        for page in sorted(site.rglob("index.html"))
    }
    api = {name: tree for name, tree in pages.items() if tree.find_all("div", class_="doc")}
    assert {"helpers", "testing", "errors"} <= set(api), sorted(api)
    return api


def _signatures(tree: Element) -> list[str]:
    return [
        " ".join(element.text().split()) for element in tree.find_all("div", class_="doc-signature")
    ]


def _bases(tree: Element) -> list[str]:
    texts = [" ".join(p.text().split()) for p in tree.find_all("p")]
    return [text for text in texts if text.startswith("Bases: ")]


def test_signatures_name_no_private_type(site: Path) -> None:
    found = []
    for name, tree in _api_pages(site).items():
        signatures = _signatures(tree)
        assert signatures, name
        for signature in signatures:
            # A quoted default ("r") is a value; a quoted type is not.
            without_values = re.sub(r"=\s*(['\"]).*?\1", "=", signature)
            if PRIVATE.search(without_values) or QUOTED_TYPE.search(
                re.sub(r"Literal\[[^\]]*\]", "Literal", without_values)
            ):
                found.append(f"{name}: {signature}")
    assert found == []


def test_bases_only_where_they_say_what_catches_an_error(site: Path) -> None:
    shown = {name: _bases(tree) for name, tree in _api_pages(site).items()}
    assert {name for name, bases in shown.items() if bases} == {"errors", "testing"}
    assert set(shown["errors"]) == {"Bases: RuntimeError"}
    assert set(shown["testing"]) == {"Bases: AssertionError"}


def test_variadic_arguments_show_their_param_spec(site: Path) -> None:
    """``*args: P.args``, as written, not ``*args: args``."""
    signatures = _signatures(_api_pages(site)["helpers"])
    callbacks = [s for s in signatures if s.startswith("callback(")]
    assert callbacks
    assert all("*args: P.args, **kwargs: P.kwargs" in s for s in callbacks), callbacks
