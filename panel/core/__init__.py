"""What every app of the panel shares, below all of them: it imports no app.

``errors`` (ServiceError), ``taskqueue`` (enqueue_task), ``runas`` (who runs a program, running it
and writing its files as that user), ``osusers`` (the system users the panel creates as root),
``forms`` (PanelForm) and ``web`` (helpers of the views). A contract in pyproject.toml keeps it so.
"""
