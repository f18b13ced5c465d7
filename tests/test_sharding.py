"""``--shard I/N`` splits a run into N disjoint parts that together are the whole run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.conftest import RENDER_SEED_VARIABLE
from tests.families import sampled_families, split_matrix
from tests.matrix import (
    ROOT,
    family_of,
    full_matrix,
    parse_shard,
    registry_keys,
    sample_matrix,
    shard_of,
)

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 1100])
def test_every_combination_lands_in_exactly_one_shard(count: int) -> None:
    units = [combo.id for combo in full_matrix()]
    shards = shard_of(units, count)
    assert set(shards) == set(units)
    assert set(shards.values()) <= set(range(1, count + 1))
    sizes = [list(shards.values()).count(index) for index in range(1, count + 1)]
    assert max(sizes) - min(sizes) <= 1, "shards differ by at most one combination"


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "x/2", "2", "-1/3"])
def test_bad_shards_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected I/N"):
        parse_shard(text)


def test_registry_cut_keeps_the_registry_order() -> None:
    keys = registry_keys()
    assert registry_keys(",".join(reversed(keys[:3]))) == keys[:3]
    assert len(full_matrix(keys[:6])) == 4 * 2**6 + len(full_matrix()) - 4 * 2 ** len(keys)
    assert len(sample_matrix(keys[:2])) < len(sample_matrix())
    with pytest.raises(ValueError, match="not in the registry"):
        registry_keys("file,nonsense")


def _collected(*args: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in result.stdout.splitlines() if "::" in line]


@pytest.mark.slow
def test_shards_of_a_collection_are_disjoint_and_complete() -> None:
    """What pytest collects: the full matrix and every other test, cut in three."""
    everything = _collected()
    shards = [_collected("--shard", f"{index}/3") for index in (1, 2, 3)]
    assert sorted(item for shard in shards for item in shard) == sorted(everything)
    combos = [
        {item.split("[")[1] for item in shard if "test_matrix.py" in item} for shard in shards
    ]
    for first, second in ((0, 1), (0, 2), (1, 2)):
        assert not combos[first] & combos[second]
    # Every combination is in the run: in a test of its own, or in a batch.
    keys = registry_keys()
    sampled = sampled_families(keys, int(os.environ[RENDER_SEED_VARIABLE]))
    alone, batches = split_matrix(full_matrix(), keys, sampled)
    matrix = {item.split("[")[1][:-1] for item in everything if "test_matrix.py" in item}
    assert matrix == {combo.id for combo in alone} | {batch.id for batch in batches}
    assert len(alone) + sum(len(batch.combinations) for batch in batches) == len(full_matrix())


@pytest.mark.slow
def test_each_combination_runs_on_one_worker(tmp_path: Path) -> None:
    """A combination and its docs twin run on one worker, one render each (``matrix_scope``)."""
    timings = tmp_path / "timings"
    timings.mkdir()
    command = [sys.executable, "-m", "pytest", "tests/test_matrix.py", "-n", "2", "-v"]
    command += ["--matrix", "sample", "--matrix-keys", "lock,tempdir", "-k", "complete or pure"]
    result = subprocess.run(
        [*command, "--basetemp", str(tmp_path / "base")],
        cwd=ROOT,
        env={**os.environ, "MATRIX_TIMINGS": str(timings)},
        capture_output=True,
        text=True,
        check=True,
    )
    workers: dict[str, set[str]] = {}
    for line in result.stdout.splitlines():
        found = re.match(r"\[(gw\d+)\].* PASSED tests/test_matrix.py::\w+\[(.+)\]", line)
        if found:
            workers.setdefault(family_of(found[2]), set()).add(found[1])
    combos = sample_matrix(("lock", "tempdir"))
    assert set(workers) == {combo.family for combo in combos}
    assert all(len(names) == 1 for names in workers.values()), workers
    assert len({name for names in workers.values() for name in names}) == 2, "both workers ran"
    renders = sum(json.loads(p.read_text())["render"][1] for p in timings.glob("*.json"))
    assert renders == len(combos)
