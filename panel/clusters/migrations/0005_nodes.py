# Nodes (issue 13). Clusters provisioned before nodes existed ran on this machine: they go to the
# node of this machine's agent (PANEL_NODE_NAME, "local" by default), created here with what the
# settings and the machine say; the agent refreshes it with its first heartbeat.

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def machine_node_fields():
    import os

    ram = settings.PANEL_NODE_RAM_GB * 1024**3 or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    first, last = settings.PANEL_PORT_RANGE
    return {
        "address": settings.PANEL_PUBLIC_HOST,
        "port_first": first,
        "port_last": last,
        "data_dir": str(settings.PANEL_DATA_DIR),
        "ram_bytes": ram,
        "vcpus": settings.PANEL_NODE_VCPUS or 2 * (os.cpu_count() or 1),
    }


def existing_clusters_to_this_node(apps, schema_editor):
    Cluster = apps.get_model("clusters", "Cluster")
    Node = apps.get_model("clusters", "Node")
    local = Cluster.objects.filter(kind="local", node__isnull=True)
    if not local.exists():
        return
    node, _created = Node.objects.get_or_create(name=settings.PANEL_NODE_NAME, defaults=machine_node_fields())
    local.update(node=node)


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0004_cluster_status_deleting"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Node",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.SlugField(max_length=40, unique=True, verbose_name="name")),
                ("address", models.CharField(max_length=255, verbose_name="address")),
                ("port_first", models.PositiveIntegerField(verbose_name="first port")),
                ("port_last", models.PositiveIntegerField(verbose_name="last port")),
                ("data_dir", models.CharField(max_length=500, verbose_name="data directory")),
                ("ram_bytes", models.PositiveBigIntegerField(verbose_name="RAM")),
                ("vcpus", models.PositiveIntegerField(verbose_name="vCPUs")),
                (
                    "state",
                    models.CharField(
                        choices=[("active", "Active"), ("draining", "Draining")],
                        default="active",
                        max_length=16,
                    ),
                ),
                ("last_heartbeat", models.DateTimeField(blank=True, null=True)),
                ("versions", models.CharField(blank=True, max_length=100)),
                ("agent_host", models.CharField(blank=True, max_length=255)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "ordering": ("name",),
            },
        ),
        migrations.RemoveConstraint(
            model_name="cluster",
            name="cluster_local_port_unique",
        ),
        migrations.AddConstraint(
            model_name="node",
            constraint=models.CheckConstraint(
                condition=models.Q(("port_first__lt", models.F("port_last"))), name="node_port_range_ordered"
            ),
        ),
        migrations.AddField(
            model_name="cluster",
            name="node",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="clusters",
                to="clusters.node",
            ),
        ),
        migrations.RunPython(existing_clusters_to_this_node, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="cluster",
            constraint=models.UniqueConstraint(
                condition=models.Q(("kind", "local")),
                fields=("node", "port"),
                name="cluster_local_port_unique_per_node",
            ),
        ),
    ]
