"""Workstream workflow code: ``child_*`` runs in the child ``Workstream`` workflow,
``parent_*`` in the ``GraphRun`` that launched it."""
