"""The template's own documentation builds strictly."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.matrix import ROOT

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path


@pytest.mark.slow
def test_template_docs_build_strict(
    run_tool: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    run_tool(ROOT, "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site"))
    assert (tmp_path / "site" / "adding-a-resource" / "index.html").is_file()
