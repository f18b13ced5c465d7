"""README's quick start, as a new user runs it, from a git clone of the template."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import BIN
from tests.matrix import ROOT
from tests.updating import answers, commit_all, copy_project, git, run

pytestmark = pytest.mark.slow


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


# python3 as the user has it: the base interpreter, which has pip (this venv has not).
BASE_PYTHON = shlex.quote(str(Path(sys.base_prefix) / "bin" / "python3"))


def console_blocks(readme: Path) -> list[str]:
    """The text of each of *readme*'s console blocks."""
    return re.findall(r"```console\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)


def readme_commands(readme: Path, verb: str) -> list[str]:
    """The lines of *readme*'s console blocks that run ``copier <verb>``, verbatim.

    Blocks that show a session (a ``$ `` prompt, then the output) are not
    commands to copy: ``readme_sessions`` has those.
    """
    pattern = re.compile(rf" copier {verb}( |$)")
    return [
        line
        for block in console_blocks(readme)
        if not block.startswith("$ ")
        for line in block.splitlines()
        if pattern.search(line)
    ]


def readme_sessions(readme: Path) -> list[tuple[str, list[str]]]:
    """The console blocks that show a command (after ``$ ``) and the end of its output.

    An output that starts with a ``...`` line shows only its last lines.
    """
    sessions = []
    for block in console_blocks(readme):
        if block.startswith("$ "):
            command, *output = block.splitlines()
            sessions.append((command.removeprefix("$ "), output))
    return sessions


def test_readme_copy_commands_work(template_clone: Path, tmp_path: Path) -> None:
    """Every ``copier copy`` line of the README runs as written (CI adds nothing)."""
    lines = readme_commands(ROOT / "README.md", "copy")
    assert len(lines) == 3  # the quick start (tested above) and the two without prompts
    run(["bash", "-c", f"{BASE_PYTHON} -m pip install -q uv"], tmp_path)
    for number, line in enumerate(lines[1:]):
        destination = tmp_path / f"project-{number}"
        command = line.replace("../my-project", shlex.quote(str(destination)))
        run(["bash", "-c", command.replace("python3", BASE_PYTHON)], template_clone)
        recorded = answers(destination)
        assert recorded["_src_path"] == str(template_clone)
        assert recorded["_commit"] == "v0.1.0"


def test_readme_update_commands_work(template_clone: Path, tmp_path: Path) -> None:
    """The update and check-update lines of both READMEs run as written.

    Updates get ``--defaults`` (CI has no terminal), nothing else.  The template's
    README runs Copier through ``python3 -m uv``, a generated README through ``uv``
    (this environment's, first on the PATH).
    """
    template = tmp_path / "template"
    run(["git", "clone", "-q", str(template_clone), str(template)], tmp_path)
    project = copy_project(template, tmp_path / "project", resources=["lock"], docs=False)
    assert answers(project)["_commit"] == "v0.1.0"

    def release(tag: str) -> None:
        readme = template / "template" / "README.md.jinja"
        text = readme.read_text(encoding="utf-8")
        readme.write_text(re.sub(r"Supported[^:]*:", f"Supported ({tag}):", text), "utf-8")
        commit_all(template, f"Template {tag}")
        git(template, "tag", tag)

    def run_line(line: str, **env: str) -> str:
        result = run(["bash", "-c", line.replace("python3", BASE_PYTHON)], project, env=env)
        return result.stdout + result.stderr

    run(["bash", "-c", f"{BASE_PYTHON} -m pip install -q uv"], tmp_path)
    release("v0.2.0")
    (check,) = readme_commands(ROOT / "README.md", "check-update")
    assert "latest version is 0.2.0" in run_line(check)
    (template_update,) = [
        line for line in readme_commands(ROOT / "README.md", "update") if "--data" not in line
    ]
    run_line(f"{template_update} --defaults")
    assert answers(project)["_commit"] == "v0.2.0"
    commit_all(project, "Update to v0.2.0")

    release("v0.3.0")
    (project_update,) = readme_commands(project / "README.md", "update")
    assert project_update.startswith("uv tool run ")
    run_line(f"{project_update} --defaults", PATH=f"{BIN}:{os.environ['PATH']}")
    assert answers(project)["_commit"] == "v0.3.0"
    assert "Supported (v0.3.0): Python" in (project / "README.md").read_text(encoding="utf-8")


def test_readme_adds_and_drops_resources_as_it_says(template_clone: Path, tmp_path: Path) -> None:
    """README's two ``--data 'resources=[...]'`` updates, run as written, in order.

    On a project made with ``[file, sqlite]``, the first adds ``lock`` and keeps
    both, the second drops ``sqlite`` and keeps the others: ``--data`` replaces the
    list, so each command gives the whole new one.  The project's own README then
    gives the same advice for its new list.
    """
    lines = [line for line in readme_commands(ROOT / "README.md", "update") if "--data" in line]
    assert [line.split("--data ")[1] for line in lines] == [
        "'resources=[file, sqlite, lock]'",
        "'resources=[file, lock]'",
    ]
    project = copy_project(
        template_clone, tmp_path / "project", resources=["file", "sqlite"], docs=False
    )
    package = project / "src" / answers(project)["package_name"]
    run(["bash", "-c", f"{BASE_PYTHON} -m pip install -q uv"], tmp_path)

    run(["bash", "-c", lines[0].replace("python3", BASE_PYTHON)], project)
    assert answers(project)["resources"] == ["file", "sqlite", "lock"]
    assert {"files.py", "sqlite.py", "locks.py"} <= {path.name for path in package.iterdir()}
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert "This\nproject's is `[file, sqlite, lock]`, so:" in readme
    assert "- `--data 'resources=[file, sqlite]'` drops `lock`," in readme
    commit_all(project, "Add lock")

    run(["bash", "-c", lines[1].replace("python3", BASE_PYTHON)], project)
    assert answers(project)["resources"] == ["file", "lock"]
    modules = {path.name for path in package.iterdir()}
    assert {"files.py", "locks.py"} <= modules
    assert "sqlite.py" not in modules
    assert not (project / "tests" / "test_sqlite.py").exists()


def test_readme_refusals_show_what_the_user_sees(template_clone: Path, tmp_path: Path) -> None:
    """README's bad answers, run as written: each output ends with the lines it shows.

    The copy stops with exit code 1 and writes nothing.  Where README shows the
    whole message (no ``...`` line), the template's check comes before Copier's
    parsing: no traceback at all.
    """
    sessions = readme_sessions(ROOT / "README.md")
    assert [command.split(" --data ")[1].split(" ")[0] for command, _ in sessions] == [
        "resources=sqlite",
        "'resources=[file,",
        "package_name=json",
    ]
    run(["bash", "-c", f"{BASE_PYTHON} -m pip install -q uv"], tmp_path)
    for number, (command, shown) in enumerate(sessions):
        destination = tmp_path / f"refused-{number}"
        line = command.replace("../my-project", shlex.quote(str(destination)))
        line = line.replace("python3", BASE_PYTHON)
        result = run(["bash", "-c", f"{line} 2>&1"], template_clone, check=False)
        printed = result.stdout.rstrip("\n").splitlines()
        assert result.returncode == 1, result.stdout
        assert not destination.exists()
        if shown[0] == "...":
            shown = shown[1:]
            assert "Traceback (most recent call last):" in printed
        else:
            assert not any("Traceback" in text for text in printed), result.stdout
        assert printed[-len(shown) :] == shown, result.stdout
