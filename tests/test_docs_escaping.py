"""Free-text answers land intact, and escaped, in the generated site's HTML.

The theme writes ``site_name``, ``site_description`` and ``site_author`` into
attributes and text of every page; the generated ``overrides/main.html`` escapes
them.  This test builds the site of a project whose answers are made of the
characters HTML reacts to, parses every page with the standard library's HTML
parser and compares what a browser would show with the answers, character for
character.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import TYPE_CHECKING

import pytest
import yaml

from tests.conftest import copy_project

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterator
    from pathlib import Path

pytestmark = pytest.mark.slow

HOSTILE = {
    "project_name": 'Café "<Tools>" & </title><script>alert(1)</script> &amp; {braces} *x*',
    "description": "Quotes \"double\" and 'single' > greater, < less, & and &lt; "
    "</textarea><script>alert(2)</script> {{ not jinja }}",
    "author_name": 'Zoë "Z" O\'Brien <zoe@example.org> & Co. {#}',
}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


@dataclass
class Element:
    """One parsed element: its tag, attributes, and children (elements and text)."""

    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    def iter(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def text(self) -> str:
        """The text a reader sees, without the headings' permalink signs."""
        parts = []
        for child in self.children:
            if isinstance(child, str):
                parts.append(child)
            elif "headerlink" not in child.attrs.get("class", "").split():
                parts.append(child.text())
        return "".join(parts)

    def find_all(self, tag: str, **attrs: str) -> list[Element]:
        return [
            element
            for element in self.iter()
            if element.tag == tag
            and all(
                value in element.attrs.get(name.rstrip("_"), "").split()
                if name == "class_"
                else element.attrs.get(name) == value
                for name, value in attrs.items()
            )
        ]


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        # Close up to the matching element; an end tag with no open match is ignored.
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(path: Path) -> Element:
    builder = _TreeBuilder()
    builder.feed(path.read_text(encoding="utf-8"))
    builder.close()
    return builder.root


def _nav_titles(config: dict[str, object]) -> set[str]:
    titles: set[str] = set()
    pending: list[object] = [config["nav"]]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            for title, value in item.items():
                titles.add(title)
                pending.append(value)
    return titles


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory,
    template_snapshot: Path,
    run_tool: Callable[..., subprocess.CompletedProcess[str]],
) -> Path:
    project = tmp_path_factory.mktemp("hostile")
    copy_project(template_snapshot, project, resources=["file"], docs=True, **HOSTILE)
    run_tool(project, "zensical", "build", "--strict")
    return project


def _pages(site: Path) -> list[Path]:
    pages = sorted((site / "site").rglob("*.html"))
    assert len(pages) >= 6, pages  # home, files, helpers, testing, errors, 404
    return pages


def test_head_holds_the_answers_exactly(site: Path) -> None:
    config = yaml.safe_load((site / "mkdocs.yml").read_text(encoding="utf-8"))
    name = HOSTILE["project_name"]
    allowed_titles = {name} | {f"{title} - {name}" for title in _nav_titles(config)}
    for page in _pages(site):
        tree = parse(page)
        (head,) = tree.find_all("head")
        (title,) = head.find_all("title")
        assert title.text() in allowed_titles, page
        (description,) = head.find_all("meta", name="description")
        assert description.attrs["content"] == HOSTILE["description"], page
        (author,) = head.find_all("meta", name="author")
        assert author.attrs["content"] == HOSTILE["author_name"], page


def test_header_and_drawer_show_the_project_name_exactly(site: Path) -> None:
    name = HOSTILE["project_name"]
    for page in _pages(site):
        tree = parse(page)
        (header,) = tree.find_all("header", class_="md-header")
        topic = header.find_all("div", class_="md-header__topic")[0]
        assert topic.text().strip() == name, page
        logos = tree.find_all("a", class_="md-logo")
        assert logos, page
        for logo in logos:
            assert logo.attrs["title"] == name, page
            assert logo.attrs["aria-label"] == name, page
        (drawer,) = tree.find_all("label", class_="md-nav__title", **{"for": "__drawer"})
        assert drawer.text().strip() == name, page


def test_no_answer_becomes_markup(site: Path) -> None:
    for page in _pages(site):
        tree = parse(page)
        scripts = " ".join(script.text() for script in tree.find_all("script"))
        assert "alert(" not in scripts, page
        assert tree.find_all("tools") == [], page
        assert tree.find_all("textarea") == [], page


def test_home_page_shows_the_name_and_description(site: Path) -> None:
    tree = parse(site / "site" / "index.html")
    (article,) = tree.find_all("article")
    (heading,) = article.find_all("h1")
    assert heading.text() == HOSTILE["project_name"]
    paragraphs = [" ".join(p.text().split()) for p in article.find_all("p")]
    assert " ".join(HOSTILE["description"].split()) in paragraphs
