"""The generated project's GitHub and tooling files: pinned, least privilege, in step.

``zizmor`` and the GitHub schemas run on every render in ``test_matrix.py``; these
tests check what they do not: that each action is pinned to the same commit, with
its release in a comment, in every workflow; which job may publish; that the hooks
run the dev group's ruff; that ``.python-version`` is the floor.
"""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from tests.matrix import PYTHON_VERSIONS, ROOT, Combination, registry

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    Render = Callable[[Combination], Path]

ALL = tuple(resource.key for resource in registry.RESOURCES)
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<action>\S+?)@(?P<ref>\S+)(?P<comment>.*)$")
PINNED = re.compile(r"[0-9a-f]{40}")
RELEASE_COMMENT = re.compile(r"\s+# v\d+\.\d+\.\d+$")


def _workflows(project: Path) -> dict[str, str]:
    folder = project / ".github" / "workflows"
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.yml"))}


def _load(text: str) -> dict[Any, Any]:
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    # YAML 1.1 reads the key `on` as True.
    if True in loaded:
        loaded["on"] = loaded.pop(True)
    return loaded


@pytest.mark.parametrize("docs", [False, True])
def test_every_action_is_pinned_to_one_commit_with_its_release(render: Render, docs: bool) -> None:
    project = render(Combination(ALL, async_support=True, docs=docs))
    pins: dict[str, set[str]] = {}
    for name, text in _workflows(project).items():
        for line in text.splitlines():
            match = USES.match(line)
            if match is None:
                continue
            assert PINNED.fullmatch(match["ref"]), f"{name}: {line.strip()} is not a commit"
            assert RELEASE_COMMENT.fullmatch(match["comment"]), f"{name}: {line.strip()}"
            pins.setdefault(match["action"], set()).add(f"{match['ref']}{match['comment']}")
    assert {"actions/checkout", "astral-sh/setup-uv"} <= set(pins)
    assert "pypa/gh-action-pypi-publish" in pins
    assert ("actions/deploy-pages" in pins) is docs
    different = {action: refs for action, refs in pins.items() if len(refs) > 1}
    assert different == {}, "one action, two pins: update them together"


def test_workflows_grant_least_privilege(render: Render) -> None:
    project = render(Combination(ALL, async_support=True, docs=True))
    writers = []
    for name, text in _workflows(project).items():
        workflow = _load(text)
        assert workflow["permissions"] == {}, f"{name}: top-level permissions must be empty"
        for job_id, job in workflow["jobs"].items():
            permissions = job["permissions"]
            assert set(permissions.values()) <= {"read", "write"}
            writers += [f"{name}:{job_id}:{key}" for key, v in permissions.items() if v == "write"]
            for step in job["steps"]:
                if str(step.get("uses", "")).startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, f"{name}:{job_id}"
    assert writers == [
        "docs.yml:deploy:pages",
        "docs.yml:deploy:id-token",
        "release.yml:publish:id-token",
    ]


def test_release_builds_checks_and_publishes_on_a_tag(render: Render) -> None:
    project = render(Combination((), async_support=False, docs=False))
    release = _load(_workflows(project)["release.yml"])
    assert release["on"] == {"push": {"tags": ["v*"]}}
    build, publish = release["jobs"]["build"], release["jobs"]["publish"]
    runs = [step.get("run", "") for step in build["steps"]]
    assert "uv build" in runs
    assert any(run.startswith("uvx twine==") and "check --strict" in run for run in runs)
    checkout = build["steps"][0]
    assert checkout["with"]["fetch-depth"] == 0, "hatch-vcs needs the tags"
    assert publish["needs"] == "build"
    assert publish["environment"]["name"] == "pypi"
    (publisher,) = [s for s in publish["steps"] if "pypi-publish" in s.get("uses", "")]
    assert publisher["with"] == {"attestations": True}, "trusted publishing: no token"


@pytest.mark.parametrize("docs", [False, True])
def test_docs_are_built_in_ci_and_published_from_main(render: Render, docs: bool) -> None:
    project = render(Combination(("file",), async_support=False, docs=docs))
    workflows = _workflows(project)
    ci = _load(workflows["ci.yml"])
    assert ("docs" in ci["jobs"]) is docs
    assert ("docs.yml" in workflows) is docs
    if not docs:
        return
    check = ci["jobs"]["docs"]["steps"][-1]
    assert check["shell"] == "bash", "pipefail: a failed build fails the step"
    assert "zensical build --strict" in check["run"]
    pages = _load(workflows["docs.yml"])
    assert pages["on"] == {"push": {"branches": ["main"]}, "workflow_dispatch": None}
    assert pages["concurrency"] == {"group": "pages", "cancel-in-progress": False}
    build, deploy = pages["jobs"]["build"], pages["jobs"]["deploy"]
    assert "uv run --group docs zensical build --strict" in [s.get("run") for s in build["steps"]]
    (upload,) = [s for s in build["steps"] if "upload-pages-artifact" in s.get("uses", "")]
    assert upload["with"] == {"path": "site/"}
    assert deploy["needs"] == "build"
    assert deploy["environment"]["name"] == "github-pages"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}


@pytest.mark.parametrize("python_min", PYTHON_VERSIONS)
def test_ci_covers_linux_and_macos_and_every_python(render: Render, python_min: str) -> None:
    project = render(Combination((), async_support=False, docs=False, python_min=python_min))
    assert (project / ".python-version").read_text(encoding="utf-8") == f"{python_min}\n"
    ci = _load(_workflows(project)["ci.yml"])
    expected = [v for v in PYTHON_VERSIONS if Version(v) >= Version(python_min)]
    matrix = ci["jobs"]["test"]["strategy"]["matrix"]
    assert matrix == {"os": ["ubuntu-latest", "macos-latest"], "python-version": expected}
    coverage = ci["jobs"]["coverage"]
    assert coverage["env"] == {"COVERAGE_CORE": "sysmon"}
    setup = [s for s in coverage["steps"] if "setup-uv" in s.get("uses", "")]
    assert setup[0]["with"]["python-version"] == expected[-1]
    assert "uv run pytest --cov --cov-report=term-missing" in [
        step.get("run") for step in coverage["steps"]
    ]


def test_coverage_is_configured_with_branches_and_a_floor(render: Render) -> None:
    project = render(Combination(("file",), async_support=False, docs=False))
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["coverage"]["run"]["branch"] is True
    floor = pyproject["tool"]["coverage"]["report"]["fail_under"]
    assert isinstance(floor, int)
    assert 50 <= floor < 100
    dev = {Requirement(text).name for text in pyproject["dependency-groups"]["dev"]}
    assert "pytest-cov" in dev


def test_version_comes_from_git_tags_with_a_fallback(render: Render) -> None:
    project = render(Combination(("file",), async_support=False, docs=False))
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"]
    assert pyproject["project"]["dynamic"] == ["version"]
    assert any(r.startswith("hatch-vcs") for r in pyproject["build-system"]["requires"])
    assert pyproject["tool"]["hatch"]["version"] == {
        "source": "vcs",
        "fallback-version": "0.0.0+unknown",
    }


def test_pre_commit_ruff_is_the_dev_group_ruff(render: Render) -> None:
    """The hook's ruff is the dev group's floor, and the minor series the matrix ran."""
    project = render(Combination(("file",), async_support=False, docs=False))
    config = yaml.safe_load((project / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    repos = {repo["repo"]: repo for repo in config["repos"]}
    hook_rev = repos["https://github.com/astral-sh/ruff-pre-commit"]["rev"]
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    (ruff,) = [
        Requirement(text)
        for text in pyproject["dependency-groups"]["dev"]
        if Requirement(text).name == "ruff"
    ]
    (floor,) = [spec.version for spec in ruff.specifier if spec.operator == ">="]
    assert hook_rev == f"v{floor}", "bump the hook's rev and the dev group's ruff together"
    installed = Version(version("ruff"))
    assert Version(floor).release[:2] == installed.release[:2], (
        f"the matrix lints with ruff {installed}, the hook pins {hook_rev}: a new minor "
        "series changes rules and formatting, so move both to it"
    )
    hooks = {
        hook["id"] for hook in repos["https://github.com/pre-commit/pre-commit-hooks"]["hooks"]
    }
    assert "check-merge-conflict" in hooks


def test_dependabot_leaves_the_template_lines_alone(render: Render) -> None:
    """Dependabot updates uv.lock and the actions users add, never a template pin.

    The template's pins and pyproject's ranges move with each template version;
    a bump merged from Dependabot would conflict with the update that moves the
    same line (``tests/test_update.py`` shows both).  So every action of every
    generated workflow is ignored, and uv updates only the lock.
    """
    project = render(Combination((), async_support=False, docs=False))
    config = yaml.safe_load((project / ".github" / "dependabot.yml").read_text(encoding="utf-8"))
    updates = {update["package-ecosystem"]: update for update in config["updates"]}
    assert set(updates) == {"github-actions", "uv"}
    templates = sorted((ROOT / "template" / ".github" / "workflows").glob("*.jinja"))
    owned = {
        match["action"]
        for path in templates
        for line in path.read_text(encoding="utf-8").splitlines()
        if (match := USES.match(line))
    }
    ignored = [entry["dependency-name"] for entry in updates["github-actions"]["ignore"]]
    assert ignored == sorted(owned), "ignore exactly the actions of the template's workflows"
    assert all(set(entry) == {"dependency-name"} for entry in updates["github-actions"]["ignore"])
    assert updates["uv"]["versioning-strategy"] == "lockfile-only"
    for update in updates.values():
        assert update["cooldown"] == {"default-days": 7}


@pytest.mark.parametrize("docs", [False, True])
def test_ci_checks_weekly_for_a_newer_template(render: Render, docs: bool) -> None:
    """A scheduled run does only the template-update job; a push never runs it."""
    project = render(Combination((), async_support=False, docs=docs))
    ci = _load(_workflows(project)["ci.yml"])
    assert ci["on"]["schedule"] == [{"cron": "23 5 * * 1"}]
    assert "workflow_dispatch" in ci["on"]
    jobs = ci["jobs"]
    check = jobs.pop("template-update")
    assert check["if"] == (
        "${{ github.event_name == 'schedule' || github.event_name == 'workflow_dispatch' }}"
    )
    assert check["permissions"] == {"contents": "read"}
    script = check["steps"][-1]["run"]
    assert '"${run_copier[@]}" check-update --output-format json' in script
    assert '>>"$GITHUB_STEP_SUMMARY"' in script
    assert "${{" not in script, "no expression in a run script (template injection)"
    readme = (project / "README.md").read_text(encoding="utf-8")
    (update,) = re.findall(r'^ *update="(.*)"$', script, re.M)
    assert f"\n{update}\n" in readme, "the job shows the README's update command"
    assert sorted(jobs) == (["coverage", "docs", "test"] if docs else ["coverage", "test"])
    for job in jobs.values():
        assert job["if"] == "${{ github.event_name != 'schedule' }}"
    assert "event_name" in ci["concurrency"]["group"], "a push does not cancel the weekly run"
