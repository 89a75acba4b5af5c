from django.db import migrations, models


class Migration(migrations.Migration):
    """Where a run's load generator ran (the clients' cgroup and its limits) and its CPU use."""

    dependencies = [
        ("benchmarks", "0004_pool_size_sweeps"),
    ]

    operations = [
        migrations.AddField(
            model_name="benchmarkrun",
            name="client",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
