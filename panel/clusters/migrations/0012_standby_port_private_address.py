# Written for issue 28 (standby_connection, private_connection).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('clusters', '0011_cluster_host_address'),
    ]

    operations = [
        migrations.AddField(
            model_name='cluster',
            name='standby_port',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='node',
            name='private_address',
            field=models.CharField(blank=True, max_length=255, verbose_name='private address'),
        ),
    ]
