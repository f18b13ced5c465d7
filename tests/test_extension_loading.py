"""The Copier extension uses the registry of the template version being rendered."""

from __future__ import annotations

from pathlib import Path

import copier

from tests.conftest import copy_template
from tests.matrix import DEFAULT_ANSWERS

ANSWERS = {**DEFAULT_ANSWERS, "resources": ["file"], "docs": False}


def _template_with_summary(folder: Path, summary: str) -> Path:
    """Copy the template into *folder*, with *summary* as the ``file`` resource's."""
    folder.mkdir()
    copy_template(folder)
    with (folder / "extensions" / "registry.py").open("a", encoding="utf-8") as registry:
        registry.write(
            "\nimport dataclasses as _dataclasses\n\n"
            "RESOURCES = tuple(\n"
            f"    _dataclasses.replace(r, summary={summary!r}) if r.key == 'file' else r\n"
            "    for r in RESOURCES\n"
            ")\n"
        )
    return folder


def test_each_render_uses_its_own_registry(tmp_path: Path) -> None:
    """Like ``copier update``: two template versions rendered in one process."""
    summaries = {"one": "Summary of template version one.", "two": "Summary of version two."}
    templates = {
        version: _template_with_summary(tmp_path / f"template-{version}", summary)
        for version, summary in summaries.items()
    }
    for render, version in enumerate(("one", "two", "one")):
        dst = tmp_path / f"render-{render}-{version}"
        copier.run_copy(
            str(templates[version]), str(dst), data=ANSWERS, defaults=True, unsafe=True, quiet=True
        )
        readme = (dst / "README.md").read_text(encoding="utf-8")
        rendered = [name for name, summary in summaries.items() if summary in readme]
        assert rendered == [version], (
            f"render {render} of template version {version} shows the registry of {rendered}"
        )
