"""The lists of resources in this repository's own pages, made from the registry.

The site renders them when it is built: ``mkdocs.yml`` loads this module as
Zensical's macros module, and the pages that list resources call ``MACROS``
(``docs/resources/index.md``, ``docs/questions.md``).  ``README.md`` is read where
nothing renders it, on GitHub and in a terminal, so its lists are written into it:
``python -m extensions.tables --write`` rewrites them, and ``--check`` exits 1
when they are stale (``tests/test_registry.py`` fails then too).  The README's
generated lines are the rows of its Resources table, the ``resources`` row of its
Questions table and the example message that names every choice.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # extensions/ is not a package: Zensical loads this by path
    sys.path.insert(0, str(HERE))

import registry  # noqa: E402

README = HERE.parent / "README.md"
_RESOURCES_HEADER = "| Key | Module | Classes |\n| --- | --- | --- |\n"
_RESOURCES_ROWS = re.compile(re.escape(_RESOURCES_HEADER) + r"(?:\|.*\n)*")
_QUESTION_ROW = re.compile(r"^(\| `resources` \| Any of )[^;|]*(;)", re.MULTILINE)
_CHOICES_MESSAGE = re.compile(
    r"^(resources: 'redis' is not a choice; the choices are ).*$", re.MULTILINE
)


def short_title(resource: registry.Resource) -> str:
    """The title without its parenthesis: ``Files (managed file, ...)`` gives ``Files``."""
    return resource.title.split(" (")[0]


def _code(names: Sequence[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def resource_keys(resources: Sequence[registry.Resource] = registry.RESOURCES) -> str:
    """Every key as inline code, in registry order: ``\\`file\\`, \\`sqlite\\`, ...``."""
    return _code([resource.key for resource in resources])


def choices_sentence(resources: Sequence[registry.Resource] = registry.RESOURCES) -> str:
    """The keys as the extension's message lists them: ``file, sqlite and lock.``."""
    keys = [resource.key for resource in resources]
    return f"{', '.join(keys[:-1])} and {keys[-1]}." if len(keys) > 1 else f"{''.join(keys)}."


def overview_table(resources: Sequence[registry.Resource] = registry.RESOURCES) -> str:
    """The table of ``docs/resources/index.md``: answer, page, module, what it is for."""
    lines = ["| Answer | Page | Module | What it is for |", "| --- | --- | --- | --- |"]
    lines += [
        f"| `{r.key}` | [{short_title(r)}]({r.key}.md) | `{r.module}` | {r.summary} |"
        for r in resources
    ]
    return "\n".join(lines)


def readme_rows(resources: Sequence[registry.Resource] = registry.RESOURCES) -> str:
    """The rows of the README's Resources table: key, module, classes."""
    rows = []
    for r in resources:
        variants = f" (async: {_code(r.async_exports)})" if r.async_exports else ""
        rows.append(f"| `{r.key}` | `{r.module}` | {_code(r.exports)}{variants} |\n")
    return "".join(rows)


def readme_text(text: str, resources: Sequence[registry.Resource] = registry.RESOURCES) -> str:
    """*text*, a README, with its generated lines made from *resources*.

    With no resources, what is left is what was written by hand.
    """
    for pattern, name in (
        (_RESOURCES_ROWS, "the Resources table"),
        (_QUESTION_ROW, "the resources row of the Questions table"),
        (_CHOICES_MESSAGE, "the message that names the choices"),
    ):
        if not pattern.search(text):
            raise ValueError(f"README.md has lost {name}: tables.py cannot find it")
    text = _RESOURCES_ROWS.sub(lambda _: _RESOURCES_HEADER + readme_rows(resources), text)
    text = _QUESTION_ROW.sub(lambda m: m[1] + resource_keys(resources) + m[2], text)
    return _CHOICES_MESSAGE.sub(lambda m: m[1] + choices_sentence(resources), text)


MACROS: dict[str, Callable[[], str]] = {
    "resource_keys": resource_keys,
    "resources_overview": overview_table,
}
"""What the site's pages call: ``{{ resource_keys() }}``, ``{{ resources_overview() }}``."""


def define_env(env: Any) -> None:
    """Give Zensical's macros the registry's lists (the macros plugin's entry point)."""
    for name, function in MACROS.items():
        env.macro(function, name)


def main(argv: list[str] | None = None) -> int:
    """Rewrite (``--write``) or check (``--check``) README.md's generated lines."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="rewrite README.md")
    action.add_argument("--check", action="store_true", help="exit 1 if README.md is stale")
    args = parser.parse_args(argv)
    current = README.read_text(encoding="utf-8")
    fresh = readme_text(current)
    if args.write:
        if fresh != current:
            README.write_text(fresh, encoding="utf-8")
        return 0
    if fresh != current:
        print("README.md is stale: run python -m extensions.tables --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
