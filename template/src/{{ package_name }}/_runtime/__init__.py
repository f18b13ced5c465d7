"""The runtime every resource class of the package is built on.

Maintained by the template: this folder is the same in every project made from it,
and ``copier update`` replaces it.  Change it in the template, not here.  The
package's own modules (``errors``, ``helpers``, ``testing``, ``pytest_plugin`` and
one module per resource) import from it; it imports nothing from them.

The contract: ``_resource`` (and ``_async_resource``), ``_cleanup``, ``errors``;
the helpers: ``helpers``, ``async_helpers``; the test toolkit, named by
``testing``: ``_process`` and ``snapshot``, ``leak_check``, ``fd_limit``,
``_faults``, ``conformance``, ``async_conformance``; and ``pytest_plugin``.
The stress tier's machinery, ``stress`` and ``async_stress``, is imported by the
project's ``tests/stress/`` alone: it needs ``hypothesis``, a dev dependency.
``children`` (a forked child, a signal at one point) serves the project's tests,
and ``suite`` (a pytest plugin) sets up their session; ``_checks`` holds the
argument checks that several resources share, ``_pools`` what the two pools
share.  ``leftovers`` (what an unfinished ``copier update`` left) imports
nothing: the project's tests load it by its path.
``loopback`` is the HTTP server that the HTTP resources' tests talk to.
"""
