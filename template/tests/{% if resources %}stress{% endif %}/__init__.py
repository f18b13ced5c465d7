"""The stress tier: crashes, real interrupts, random misuse and load.

Slow by design, and so deselected by default: ``uv run pytest -m stress`` runs it.
One module per resource; what they share is the template's runtime
(``<package>._runtime.stress``, and ``async_stress`` for the asyncio classes),
which the template tests with a suite of its own.  Each test prints its figures
(kills survived, interrupts landed, random sequences run, load held) in a
"stress figures" section at the end of the run.  ``STRESS_SEED=<seed>`` replays
the random delays of a run.
"""
