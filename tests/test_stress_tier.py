"""The generated stress tier runs, and passes, once: all resources, with asyncio.

The matrix runs each generated project's default tier, which leaves the stress tier
out (``-m "not stress"`` in its pytest settings); this test runs that tier on the
combination that has every class: ``pytest -m stress``, as its README says.
"""

from __future__ import annotations

import re
import shutil
from typing import TYPE_CHECKING

import pytest

from tests.matrix import Combination, registry

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path

STORMS = ("SIGINT (KeyboardInterrupt)", "SIGALRM (Alarm)", "SIGTERM (SystemExit)")
"""The stress tier's signal storms, as its figures name them (``Storm.label``)."""

pytestmark = pytest.mark.slow

ALL_WITH_ASYNC = Combination(
    tuple(resource.key for resource in registry.RESOURCES), async_support=True, docs=False
)


def test_stress_tier_passes_on_all_resources_with_asyncio(
    render: Callable[[Combination], Path],
    run_tool: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    # A copy: hypothesis leaves a .hypothesis/ cache in the project it runs in, and
    # the render may be shared with the matrix's checks of the same combination.
    project = tmp_path / "project"
    shutil.copytree(render(ALL_WITH_ASYNC), project)
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert "`uv run pytest -m stress`" in readme
    stress = ["-m", "pytest", "-m", "stress", "-p", "no:cacheprovider", "-q"]
    result = run_tool(project, "python", *stress, timeout=1200)
    summary = result.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary), summary
    assert not re.search(r"\d+ (failed|errors?)\b", summary), summary
    assert "stress figures" in result.stdout
    # Every SIGKILL, signal storm and property run reports its figures.
    storms = [f"{name} in the block" for name in STORMS]
    for kind in ("SIGKILLs survived", *storms, "random sequences held"):
        assert kind in result.stdout, f"no {kind!r} figures:\n{result.stdout[-4000:]}"


def test_default_tier_leaves_the_stress_tier_out(
    render: Callable[[Combination], Path],
    run_tool: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    project = render(ALL_WITH_ASYNC)
    files = ["tests/stress", "tests/test_package.py"]
    collect = ["-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files]
    result = run_tool(project, "python", *collect)
    assert "test_package.py" in result.stdout
    assert "stress/" not in result.stdout
    assert re.search(r"\d+ deselected", result.stdout), result.stdout[-2000:]
