"""The template's own site: Zensical builds it strictly, and it agrees with the template.

Zensical's strict build fails on a link to a missing page or anchor.  It does not
report what MkDocs' ``validation`` settings did (a page left out of the nav, an
absolute link, a link to a missing file that is not a page), so the tests below
check those, and keep the Questions and Resources pages in step with ``copier.yml``
and the registry.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.matrix import ROOT, registry
from tests.test_registry import copier_questions

DOCS = ROOT / "docs"
CONFIG = ROOT / "mkdocs.yml"
ZENSICAL = Path(sys.executable).parent / "zensical"
LINK = re.compile(r"\]\(\s*(?:<([^>]+)>|([^)\s]+))(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def _config() -> dict[str, Any]:
    loaded = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _nav_pages(nav: list[Any]) -> list[str]:
    pages: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _resource_nav() -> list[tuple[str, str]]:
    """The (label, page) pairs of the nav's Resources section, overview excluded."""
    section = next(e["Resources"] for e in _config()["nav"] if "Resources" in e)
    pairs = [next(iter(entry.items())) for entry in section]
    return [(label, page) for label, page in pairs if page != "resources/index.md"]


def _short_title(resource: registry.Resource) -> str:
    """The registry title without its parenthesis: ``Files (managed file, ...)`` -> ``Files``."""
    return resource.title.split(" (")[0]


def _build(project: Path) -> subprocess.CompletedProcess[str]:
    """Build the site in *project* (a copy: Zensical writes site/ and .cache/ beside it)."""
    return subprocess.run(
        [str(ZENSICAL), "build", "--strict"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": str(ZENSICAL.parent), "NO_COLOR": "1", "HOME": str(project)},
        check=False,
    )


def _copy_site_sources(folder: Path) -> Path:
    shutil.copy2(CONFIG, folder / CONFIG.name)
    shutil.copytree(DOCS, folder / "docs")
    return folder


def test_site_builds_strictly(tmp_path: Path) -> None:
    result = _build(_copy_site_sources(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    for page in _nav_pages(_config()["nav"]):
        html = Path(page).with_suffix("") / "index.html"
        if page.endswith("index.md"):
            html = Path(page).parent / "index.html"
        assert (tmp_path / "site" / html).is_file(), f"{page} was not built"


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    project = _copy_site_sources(tmp_path)
    with (project / "docs" / "index.md").open("a", encoding="utf-8") as page:
        page.write("\n[gone](no-such-page.md) and [moved](updating.md#no-such-section)\n")
    result = _build(project)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "page does not exist" in output
    assert "anchor does not exist" in output


def test_the_nav_lists_every_page_once() -> None:
    listed = _nav_pages(_config()["nav"])
    assert len(listed) == len(set(listed)), "a page is listed twice in mkdocs.yml's nav"
    present = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert set(listed) == present


def _links(text: str) -> list[str]:
    prose = CODE_SPAN.sub("", FENCE.sub("", text))
    return [angled or bare for angled, bare in LINK.findall(prose)]


@pytest.mark.parametrize(
    "page", sorted(DOCS.rglob("*.md")), ids=lambda p: p.relative_to(DOCS).as_posix()
)
def test_links_stay_inside_the_site(page: Path) -> None:
    """Relative links only, to files of docs/; Zensical checks the anchors."""
    for target in _links(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        assert not target.startswith("/"), f"{page.name}: absolute link {target}"
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(DOCS.resolve()), f"{page.name}: {target} leaves docs/"
        assert path.is_file(), f"{page.name}: {target} does not exist"


def test_the_link_check_sees_links() -> None:
    text = '[a](b.md) `[c](d.md)` [e](<f g.md>) [h](i.md "title")\n```\n[j](k.md)\n```\n'
    assert _links(text) == ["b.md", "f g.md", "i.md"]


# The Resources pages: one per registry entry, no other.


def test_one_resource_page_per_registry_entry() -> None:
    pages = {p.name for p in (DOCS / "resources").glob("*.md")} - {"index.md"}
    assert pages == {f"{resource.key}.md" for resource in registry.RESOURCES}
    assert _resource_nav() == [
        (_short_title(resource), f"resources/{resource.key}.md") for resource in registry.RESOURCES
    ]


def test_the_resources_overview_lists_every_entry_in_order() -> None:
    text = (DOCS / "resources" / "index.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if re.match(r"\| `[a-z_]+` \|", line)]
    assert rows == [
        f"| `{r.key}` | [{_short_title(r)}]({r.key}.md) | `{r.module}` | {r.summary} |"
        for r in registry.RESOURCES
    ]


@pytest.mark.parametrize("resource", registry.RESOURCES, ids=lambda r: r.key)
def test_resource_page_names_its_answer_module_and_classes(resource: registry.Resource) -> None:
    text = (DOCS / "resources" / f"{resource.key}.md").read_text(encoding="utf-8")
    assert text.startswith(f"# {_short_title(resource)}\n")
    classes = ", ".join(f"`{name}`" for name in resource.exports)
    variants = ", ".join(f"`{name}`" for name in resource.async_exports) or "none"
    assert f"| `{resource.key}` | `{resource.module}` | {classes} | {variants} |" in text
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings == [
        "What the standard library does",
        "What the generated classes change",
        "How the tests prove it",
    ]


# The Questions page: one section per question of copier.yml, in its order.


def _question_sections() -> dict[str, str]:
    text = (DOCS / "questions.md").read_text(encoding="utf-8")
    parts = re.split(r"^## `([a-z_]+)`\n", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_questions_page_has_a_section_per_question_in_order() -> None:
    assert list(_question_sections()) == list(copier_questions())


def _as_answer(value: object) -> str:
    """How the page writes an answer: YAML's spelling for booleans and lists."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


@pytest.mark.parametrize("name", list(copier_questions()))
def test_question_section_states_default_choices_and_conditions(name: str) -> None:
    question = copier_questions()[name]
    section = _question_sections()[name]
    default = _as_answer(question["default"])
    default_line = re.search(r"^- \*\*Default:\*\* (.+)$", section, flags=re.MULTILINE)
    assert default_line is not None, f"{name}: no Default line"
    if "{{" not in default:
        assert default_line[1].startswith(f"`{default}`"), f"{name}: default is {default}"
    choices = question.get("choices")
    if choices is None and question["type"] == "bool":
        choices = [True, False]
    if choices is not None:
        values = choices.values() if isinstance(choices, dict) else choices
        for value in values:
            assert f"`{_as_answer(value)}`" in section, f"{name}: choice {value} not named"
    if "when" in question:
        assert "- **Asked:** only when" in section, f"{name}: asked conditionally"
    if "validator" in question:
        assert "- **Validation:**" in section, f"{name}: has a validator"
