"""A release dry run: what the generated release workflow does, short of uploading.

On the project with every resource: ``uv build`` from a tagged git repository gives
the tag's version to the sdist and to the wheel built from it, and ``twine check
--strict`` (the workflow's check) accepts both.  Without git metadata the build
still works, with the fallback version, which PyPI would refuse.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import zipfile
from typing import TYPE_CHECKING

import pytest

from tests.conftest import BIN, tool_env
from tests.matrix import PACKAGE, Combination, registry
from tests.updating import GIT_IDENTITY

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

pytestmark = pytest.mark.slow

ALL = Combination(tuple(r.key for r in registry.RESOURCES), async_support=True, docs=True)


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command,
        cwd=cwd,
        env={**tool_env(), **GIT_IDENTITY},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


def build(project: Path, out: Path) -> tuple[Path, Path]:
    run([str(BIN / "uv"), "build", "-q", "--out-dir", str(out)], project)
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


def _version_field(metadata: str) -> str:
    return next(line[9:] for line in metadata.splitlines() if line.startswith("Version: "))


def metadata_versions(sdist: Path, wheel: Path) -> tuple[str, str]:
    """The ``Version`` of the sdist's ``PKG-INFO`` and of the wheel's ``METADATA``."""
    with tarfile.open(sdist) as archive:
        top = sdist.name.removesuffix(".tar.gz")
        stream = archive.extractfile(f"{top}/PKG-INFO")
        assert stream is not None
        sdist_metadata = stream.read().decode()
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        wheel_metadata = archive.read(name).decode()
    return _version_field(sdist_metadata), _version_field(wheel_metadata)


@pytest.fixture(scope="module")
def release_project(
    render: Callable[[Combination], Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A copy of the all-resources render (the shared render must stay unchanged)."""
    project = tmp_path_factory.mktemp("release") / "project"
    shutil.copytree(render(ALL), project)
    return project


def test_build_without_git_uses_the_fallback_version(release_project: Path, tmp_path: Path) -> None:
    sdist, wheel = build(release_project, tmp_path / "dist")
    assert wheel.name == f"{PACKAGE}-0.0.0+unknown-py3-none-any.whl"
    assert metadata_versions(sdist, wheel) == ("0.0.0+unknown", "0.0.0+unknown")


def test_tagged_release_dry_run(release_project: Path, tmp_path: Path) -> None:
    run(["git", "init", "-q", "-b", "main"], release_project)
    run(["git", "add", "-A"], release_project)
    run(["git", "commit", "-q", "-m", "Generate from template"], release_project)
    run(["git", "tag", "v1.2.3"], release_project)
    sdist, wheel = build(release_project, tmp_path / "dist")
    assert sdist.name == f"{PACKAGE}-1.2.3.tar.gz"
    assert wheel.name == f"{PACKAGE}-1.2.3-py3-none-any.whl"
    assert metadata_versions(sdist, wheel) == ("1.2.3", "1.2.3")
    names = zipfile.ZipFile(wheel).namelist()
    assert f"{PACKAGE}/py.typed" in names
    assert {f"{PACKAGE}/{r.module}.py" for r in registry.RESOURCES} <= set(names)
    result = run([str(BIN / "twine"), "check", "--strict", str(sdist), str(wheel)], tmp_path)
    assert result.stdout.count("PASSED") == 2
