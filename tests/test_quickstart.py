"""README's quick start, as a new user runs it, from a git clone of the template."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import BIN, tool_env
from tests.matrix import ROOT

pytestmark = pytest.mark.slow

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Template Tests",
    "GIT_AUTHOR_EMAIL": "tests@example.com",
    "GIT_COMMITTER_NAME": "Template Tests",
    "GIT_COMMITTER_EMAIL": "tests@example.com",
}


def run(command: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command,
        cwd=cwd,
        env={**tool_env(), **GIT_IDENTITY},
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    assert result.returncode == 0, (
        f"{command} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )
    return result


@pytest.fixture(scope="module")
def template_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working tree committed into a fresh repository and tagged, like a release."""
    clone = tmp_path_factory.mktemp("clone") / "resource-template"
    files = run(["git", "ls-files", "-co", "--exclude-standard"], ROOT).stdout.split("\n")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    run(["git", "init", "-q", "-b", "main"], clone)
    run(["git", "add", "-A"], clone)
    run(["git", "commit", "-q", "-m", "Template release"], clone)
    run(["git", "tag", "v0.1.0"], clone)
    return clone


@pytest.fixture(scope="module")
def example_project(template_clone: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``copier copy`` on the command line with the shared example answers file."""
    destination = tmp_path_factory.mktemp("example") / "ledger"
    run(
        [
            str(BIN / "copier"),
            "copy",
            "--trust",
            "--defaults",
            "--data-file",
            str(ROOT / "tests" / "example-answers.yml"),
            str(template_clone),
            str(destination),
        ],
        template_clone,
    )
    return destination


def test_answers_file_records_an_updatable_source(
    example_project: Path, template_clone: Path
) -> None:
    answers = yaml.safe_load((example_project / ".copier-answers.yml").read_text(encoding="utf-8"))
    example = yaml.safe_load((ROOT / "tests" / "example-answers.yml").read_text(encoding="utf-8"))
    assert answers["_commit"] == "v0.1.0"
    assert answers["_src_path"] == str(template_clone)
    assert {key: answers[key] for key in example} == example


def test_example_project_builds_an_installable_typed_wheel(
    example_project: Path, tmp_path: Path
) -> None:
    run(
        [str(BIN / "uv"), "build", "--wheel", "--out-dir", str(tmp_path / "dist"), "-q"],
        example_project,
    )
    # A fresh project has no git tags yet: hatch-vcs gives the fallback version.
    (wheel,) = (tmp_path / "dist").glob("ledger_keeper-0.0.0+unknown-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "ledger_keeper/py.typed" in names
    assert "ledger_keeper/files.py" in names
    assert "ledger_keeper/sqlite.py" in names
    venv = tmp_path / "venv"
    run([str(BIN / "uv"), "venv", "-q", str(venv)], tmp_path)
    run(
        [
            str(BIN / "uv"),
            "pip",
            "install",
            "-q",
            "--python",
            str(venv / "bin" / "python"),
            str(wheel),
        ],
        tmp_path,
    )
    probe = "import ledger_keeper as p; print(sorted(p.__all__))"
    output = run([str(venv / "bin" / "python"), "-c", probe], tmp_path).stdout
    assert "ManagedFile" in output
    assert "AsyncSQLiteConnection" in output


def test_readme_generate_command_works(template_clone: Path, tmp_path: Path) -> None:
    """The first quick-start command, verbatim, plus --defaults (CI has no terminal)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = re.findall(r"```console\n(python3 -m pip install uv && .*copier copy.*)\n```", readme)
    assert len(command) == 1
    line = command[0].replace("../my-project", shlex.quote(str(tmp_path / "my-project")))
    line = line.replace("copier copy --trust", "copier copy --trust --defaults")
    # python3 as the user has it: the base interpreter, which has pip (this venv has not).
    base_python = Path(sys.base_prefix) / "bin" / "python3"
    line = line.replace("python3", shlex.quote(str(base_python)))
    run(["bash", "-c", line], template_clone)
    assert (tmp_path / "my-project" / "src" / "my_resources" / "__init__.py").is_file()
