"""The runtime's own suite: ``template/src/{{ package_name }}/_runtime/``, tested once.

``conftest.py`` makes the runtime importable as the top-level package ``_runtime``,
with no render; ``pytest.ini`` holds the generated projects' pytest settings, so
``python -m pytest tests/runtime`` runs the suite on any interpreter with pytest,
pytest-timeout, psutil and hypothesis (``tests/test_runtime.py`` runs it on every other
supported Python found here).
"""
