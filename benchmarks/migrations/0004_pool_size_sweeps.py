from django.db import migrations, models


class Migration(migrations.Migration):
    """Pool-size sweeps: what the sweep resizes and restores, and the size each step ran against."""

    dependencies = [
        ("benchmarks", "0003_sysbench_engine"),
    ]

    operations = [
        migrations.AddField(
            model_name="sweep",
            name="kind",
            field=models.CharField(
                choices=[("targets", "Clients × targets"), ("pool_sizes", "Clients × pool sizes")],
                default="targets",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="sweep", name="pool_sizes", field=models.JSONField(blank=True, default=list)
        ),
        migrations.AddField(
            model_name="sweep", name="pool_name", field=models.CharField(blank=True, max_length=60)
        ),
        migrations.AddField(
            model_name="sweep",
            name="original_pool_size",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="sweep", name="scratch_pool", field=models.BooleanField(default=False)
        ),
        migrations.AddField(
            model_name="sweep", name="restored_at", field=models.DateTimeField(blank=True, null=True)
        ),
        migrations.AddField(model_name="sweep", name="restore_error", field=models.TextField(blank=True)),
        migrations.AddField(
            model_name="benchmarkrun",
            name="pool_size",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="benchmarkrun",
            name="pool_size_applied",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
