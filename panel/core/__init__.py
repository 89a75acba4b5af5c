"""What every app of the panel shares, below all of them: it imports no app.

``errors`` (ServiceError), ``taskqueue`` (enqueue_task), ``runas`` (who runs a program, running it
and writing its files as that user), ``osusers`` (the system users the panel creates as root),
``forms`` (PanelForm), ``web`` (helpers of the views) and ``scram`` (SCRAM-SHA-256 secrets). A contract in pyproject.toml keeps it so.
"""
