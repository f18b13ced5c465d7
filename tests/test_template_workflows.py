"""The template repository's own GitHub workflows: audited, valid, pinned, least privilege.

Every file in ``.github/workflows/`` is checked, whatever its name, so a workflow
added later is covered without a change here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.matrix import PYTHON_VERSIONS, ROOT
from tests.test_generated_ci import PINNED, RELEASE_COMMENT, USES, _load

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path

    RunTool = Callable[..., subprocess.CompletedProcess[str]]

WORKFLOWS = ROOT / ".github" / "workflows"
GENERATED_WORKFLOWS = ROOT / "template" / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.y*ml"))


def _id(path: Path) -> str:
    return path.name


def test_there_are_workflows_to_check() -> None:
    assert [path.name for path in FILES if path.name == "docs.yml"] == ["docs.yml"]
    assert sorted(WORKFLOWS.iterdir()) == FILES, "only .yml and .yaml files belong there"


@pytest.mark.parametrize("workflow", FILES, ids=_id)
def test_workflow_passes_zizmor(workflow: Path, run_tool: RunTool) -> None:
    """No finding at all, offline, at zizmor's default persona."""
    relative = str(workflow.relative_to(ROOT))
    run_tool(ROOT, "zizmor", "--offline", "--no-config", "--no-progress", relative)


@pytest.mark.parametrize("workflow", FILES, ids=_id)
def test_workflow_matches_the_github_schema(workflow: Path, run_tool: RunTool) -> None:
    relative = str(workflow.relative_to(ROOT))
    run_tool(ROOT, "check-jsonschema", "--builtin-schema", "vendor.github-workflows", relative)


def _pins(texts: list[str]) -> dict[str, set[str]]:
    pins: dict[str, set[str]] = {}
    for text in texts:
        for line in text.splitlines():
            match = USES.match(line)
            if match is not None:
                pins.setdefault(match["action"], set()).add(f"{match['ref']}{match['comment']}")
    return pins


@pytest.mark.parametrize("workflow", FILES, ids=_id)
def test_actions_are_pinned_to_a_commit_with_their_release(workflow: Path) -> None:
    for line in workflow.read_text(encoding="utf-8").splitlines():
        match = USES.match(line)
        if match is None:
            continue
        assert PINNED.fullmatch(match["ref"]), f"{line.strip()} is not pinned to a commit"
        assert RELEASE_COMMENT.fullmatch(match["comment"]), f"{line.strip()}: no # vX.Y.Z"


def test_one_pin_per_action_here_and_in_the_generated_workflows() -> None:
    """An action updated in one workflow is updated in all, the generated ones too."""
    texts = [path.read_text(encoding="utf-8") for path in FILES]
    texts += [path.read_text(encoding="utf-8") for path in GENERATED_WORKFLOWS.glob("*.jinja")]
    different = {action: refs for action, refs in _pins(texts).items() if len(refs) > 1}
    assert different == {}


@pytest.mark.parametrize("workflow", FILES, ids=_id)
def test_workflow_grants_least_privilege(workflow: Path) -> None:
    loaded = _load(workflow.read_text(encoding="utf-8"))
    assert loaded["permissions"] == {}, "top-level permissions must be empty"
    for job_id, job in loaded["jobs"].items():
        assert isinstance(job.get("permissions"), dict), f"{job_id}: no permissions of its own"
        assert set(job["permissions"].values()) <= {"read", "write"}
        for step in job.get("steps", []):
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, job_id


def test_docs_workflow_builds_strictly_and_only_deploy_writes() -> None:
    loaded = _load((WORKFLOWS / "docs.yml").read_text(encoding="utf-8"))
    runs = [step.get("run", "") for job in loaded["jobs"].values() for step in job["steps"]]
    assert "uv run --locked zensical build --strict" in runs
    writers = {
        f"{job_id}:{scope}"
        for job_id, job in loaded["jobs"].items()
        for scope, access in job["permissions"].items()
        if access == "write"
    }
    assert writers == {"deploy:pages", "deploy:id-token"}
    assert loaded["jobs"]["deploy"]["environment"]["name"] == "github-pages"


def test_tests_workflow_runs_the_whole_run_in_shards() -> None:
    """The shards are 1..N of the same N, each running README's command with ``--shard``."""
    loaded = _load((WORKFLOWS / "tests.yml").read_text(encoding="utf-8"))
    jobs = loaded["jobs"]
    shards = jobs["full"]["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1))
    runs = [step.get("run", "") for step in jobs["full"]["steps"]]
    assert f'python3 -m uv run pytest --shard "${{SHARD}}/{len(shards)}"' in runs
    assert "python3 -m uv run pytest" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    quick = [step.get("run", "") for step in jobs["quick"]["steps"]]
    assert 'python3 -m uv run --resolution "${RESOLUTION}" pytest -m "not slow"' in quick
    # The quick tier runs at both ends of every stated range (tests/test_versions.py).
    assert jobs["quick"]["strategy"]["matrix"]["resolution"] == ["highest", "lowest-direct"]
    # The runtime's own suite on every supported Python (tests/test_runtime.py).
    versions = next(
        step["with"]["python-version"].split()
        for step in jobs["runtime"]["steps"]
        if "setup-python" in step.get("uses", "")
    )
    assert sorted(versions) == list(PYTHON_VERSIONS)
    runtime = [step.get("run", "") for step in jobs["runtime"]["steps"]]
    assert "python3 -m uv run pytest tests/test_runtime.py -k runtime_suite_passes_on" in runtime
    mutation = [step.get("run", "") for step in jobs["mutation"]["steps"]]
    assert "python3 -m uv run python -m tests.mutation_check" in mutation
    assert "schedule" in loaded["on"]
