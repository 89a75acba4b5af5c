"""Where issue 40 renamed managed's modules: the old dotted names a call to a node agent may
still carry, queued before an update (``panel.core.agent.MOVED``, filled in ``apps.ready``)."""

MODULES = {"panel.managed.services.replication": "panel.managed.services.logical_replication"}
