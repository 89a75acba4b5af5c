# Trusted sources (the database firewall): the addresses and networks a cluster takes TCP clients from.

import django.db.models.deletion
import django.utils.timezone
import uuid
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('clusters', '0005_nodes'),
    ]

    operations = [
        migrations.CreateModel(
            name='TrustedSource',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('value', models.CharField(max_length=43, verbose_name='address or network')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='trusted_sources', to='clusters.cluster')),
            ],
            options={
                'ordering': ('created_at', 'value'),
                'constraints': [models.UniqueConstraint(fields=('cluster', 'value'), name='trusted_source_unique_per_cluster')],
            },
        ),
    ]
