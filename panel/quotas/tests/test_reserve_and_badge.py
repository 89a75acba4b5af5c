"""The node's emergency reserve on a real filesystem, and the Disk full badge."""

from __future__ import annotations

import os

import pytest
from django.urls import reverse
from django.utils import timezone

from panel.quotas.models import Storage
from panel.quotas.services import reserve


@pytest.fixture
def data_dir(tmp_path, settings):
    settings.PANEL_DATA_DIR = str(tmp_path)
    settings.PANEL_DISK_RESERVE_MB = 4
    return tmp_path


def test_the_reserve_is_made_with_real_blocks_and_released_on_demand(data_dir):
    assert reserve.ensure() is True
    made = reserve.path()
    assert made.stat().st_size == 4 * 1024 * 1024
    assert made.stat().st_blocks * 512 >= 4 * 1024 * 1024  # allocated, not a sparse file
    assert oct(made.stat().st_mode & 0o777) == "0o600"
    assert reserve.ensure() is False  # already there
    assert reserve.release() == 4 * 1024 * 1024 and not made.exists()


def test_no_reserve_when_the_volume_has_no_room_for_it(data_dir, settings):
    settings.PANEL_VOLUME_WRITABLE_PERCENT = 0  # any use at all is "no room"
    assert reserve.ensure() is False and not reserve.path().exists()
    assert not any(name.startswith(".emergency") for name in os.listdir(reserve.path().parent))


def test_a_full_disk_shows_as_the_clusters_status_with_what_to_do(owner_client, cluster_row):
    Storage.objects.create(cluster=cluster_row, volume_full_since=timezone.now(), volume_percent=96.0)
    page = owner_client.get(reverse("clusters:detail", args=[cluster_row.pk])).content.decode()
    assert 'data-status="disk-full"' in page and "Disk full" in page
    assert "Delete data" in page
    listing = owner_client.get(reverse("clusters:list")).content.decode()
    assert 'data-status="disk-full"' in listing
