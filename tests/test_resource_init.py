"""Every class built on the contract initialises its base one way.

The way (``docs/adding-a-resource.md``, section 2): the first statement of its
``__init__`` that uses ``self`` calls a direct base's ``__init__`` by name,
``Resource.__init__(self)``, ``AsyncResource.__init__(self)``,
``ThreadedResource.__init__(self, twin)`` (a twin may be made before), and nothing
else sets the base's state.  Checked on the resource modules of the
template (rendered with every async class) and on the runtime.
"""

from __future__ import annotations

import ast

import jinja2
import pytest

from tests.matrix import ROOT, TEMPLATE_RUNTIME

PACKAGE = ROOT / "template" / "src" / "{{ package_name }}"
CONTRACT = frozenset({"Lifecycle", "Resource", "AsyncResource", "ThreadedResource"})
"""The bases that hold the lifecycle, and so the classes to check (with every class
derived from one)."""


def _modules() -> dict[str, ast.Module]:
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    context = {"package_name": "pkg", "async_support": True, "docs": True, "python_min": "3.11"}
    modules = {
        path.name: ast.parse(environment.from_string(path.read_text("utf-8")).render(context))
        for path in PACKAGE.glob("{% if *.py{% endif %}.jinja")
    }
    modules.update(
        (path.name, ast.parse(path.read_text("utf-8"))) for path in TEMPLATE_RUNTIME.glob("*.py")
    )
    return modules


def _base_name(base: ast.expr) -> str:
    while isinstance(base, ast.Subscript):
        base = base.value
    return base.id if isinstance(base, ast.Name) else ast.unparse(base)


def _contract_classes() -> list[tuple[str, ast.ClassDef]]:
    classes = [
        (name, node)
        for name, module in _modules().items()
        for node in ast.walk(module)
        if isinstance(node, ast.ClassDef)
    ]
    derived = set(CONTRACT)
    grew = True
    while grew:  # a class derived from one that is derived from the contract
        grew = False
        for _, node in classes:
            if node.name not in derived and any(_base_name(b) in derived for b in node.bases):
                derived.add(node.name)
                grew = True
    return [(name, node) for name, node in classes if node.name in derived - {"Lifecycle"}]


def _init(node: ast.ClassDef) -> ast.FunctionDef | None:
    for statement in node.body:
        if (
            isinstance(statement, ast.FunctionDef)
            and statement.name == "__init__"
            and "overload" not in map(ast.unparse, statement.decorator_list)
        ):
            return statement
    return None


CLASSES = _contract_classes()


def test_the_check_sees_the_classes_it_is_about() -> None:
    names = {node.name for _, node in CLASSES}
    assert {"ManagedFile", "AsyncManagedFile", "AsyncTCPClient", "ClosingWith"} <= names


@pytest.mark.parametrize(("module", "node"), CLASSES, ids=[node.name for _, node in CLASSES])
def test_init_calls_a_direct_base_by_name_first(module: str, node: ast.ClassDef) -> None:
    init = _init(node)
    if init is None:
        return  # inherits its base's __init__
    uses_self = [
        statement
        for statement in init.body
        if any(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(statement))
    ]
    assert uses_self, f"{module}: {node.name}.__init__ never initialises its base"
    first = uses_self[0]
    text = ast.unparse(first)
    call = first.value if isinstance(first, ast.Expr) else None
    assert isinstance(call, ast.Call), f"{module}: {node.name}.__init__ starts {text!r}"
    assert isinstance(call.func, ast.Attribute), text
    assert call.func.attr == "__init__", text
    assert _base_name(call.func.value) in {_base_name(base) for base in node.bases}, text
    assert [ast.unparse(argument) for argument in call.args[:1]] == ["self"], text
    for statement in ast.walk(init):
        text = ast.unparse(statement) if isinstance(statement, ast.stmt) else ""
        assert not text.startswith(("super().__init__", "self._state =")), (
            f"{module}: {node.name}.__init__ has {text!r}"
        )
