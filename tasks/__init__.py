"""The lab catalog: one module per family of lab protocols.

- :mod:`labtwin.tasks.reactor` — batch reactor (BatchReactor-v0) and an
  activation-energy determination with a final answer (ArrheniusFit-v0).

Labs register themselves with :func:`labtwin.register_task`; installed labs are
also advertised through the ``labtwin.tasks`` entry points in pyproject.toml.
"""
