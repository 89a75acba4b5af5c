"""One function per user action on clusters, called by views, commands and tasks alike.

- ``create``: a new cluster (its row, its ports, the provisioning queued); retrying a failed one.
- ``provision``: the provisioning pipeline a worker runs, and the server's configuration.
- ``lifecycle``: start, stop, restart and delete (queued by the web, or in the foreground).
- ``overview``: what the cluster page shows (live figures, connection details).
- ``resize``: moving a cluster to another plan (checked, queued, restarted on its node).
- ``config``: the owner's PostgreSQL settings (a safe subset, applied with a reload).

Attaching an existing server lives in ``panel.clusters.services.attach``, the reconciler in
``panel.clusters.services.reconciler``, users and databases in ``panel.clusters.services.roles``.
"""

from panel.clusters.services.create import (
    available_versions,
    create_cluster,
    default_cluster_name,
    new_password,
    queue_provisioning,
    retry_cluster,
)
from panel.clusters.services.lifecycle import (
    ACTIONS,
    delete_cluster,
    delete_queued,
    perform_action,
    request_action,
    request_delete,
)
from panel.clusters.services.overview import Overview, connection_details, overview
from panel.clusters.services.ports import allocate_ports
from panel.clusters.services.provision import (
    clear_reserved,
    ensure_statements,
    guard_configured,
    provision_cluster,
    write_server_config,
)

__all__ = [
    "ACTIONS",
    "Overview",
    "allocate_ports",
    "available_versions",
    "clear_reserved",
    "connection_details",
    "create_cluster",
    "default_cluster_name",
    "delete_cluster",
    "delete_queued",
    "ensure_statements",
    "guard_configured",
    "new_password",
    "overview",
    "perform_action",
    "provision_cluster",
    "queue_provisioning",
    "request_action",
    "request_delete",
    "retry_cluster",
    "write_server_config",
]
