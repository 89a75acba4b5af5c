"""Plan arithmetic of the managed service (pure unit tests)."""

from __future__ import annotations

import pytest

from panel.clusters.lib.plans import (
    DEFAULT_PLAN_SLUG,
    MAX_POOL_CONNECTIONS,
    PLANS,
    SUPERUSER_RESERVED_CONNECTIONS,
    get_plan,
)

GB = 1024**3
MB = 1024**2


@pytest.mark.parametrize(
    ("slug", "ram_gb", "pool"),
    [
        ("db-s-1vcpu-1gb", 1, 22),
        ("db-s-1vcpu-2gb", 2, 47),
        ("db-s-2vcpu-4gb", 4, 97),
        ("db-s-4vcpu-8gb", 8, 197),
        ("db-s-6vcpu-16gb", 16, 397),
        ("db-s-8vcpu-32gb", 32, 797),
    ],
)
def test_pool_connections_follow_the_managed_service_table(slug, ram_gb, pool):
    plan = get_plan(slug)
    assert plan.ram_gb == ram_gb
    assert plan.max_connections == 25 * ram_gb
    assert plan.pool_connections == pool == plan.max_connections - SUPERUSER_RESERVED_CONNECTIONS


def test_pool_connections_are_capped_at_997():
    assert MAX_POOL_CONNECTIONS == 997
    big = get_plan("db-s-16vcpu-64gb")
    assert big.pool_connections == 997
    assert big.max_connections - SUPERUSER_RESERVED_CONNECTIONS == 997
    assert all(plan.pool_connections <= 997 for plan in PLANS)


def test_three_connections_are_reserved_for_the_superuser():
    assert SUPERUSER_RESERVED_CONNECTIONS == 3


@pytest.mark.parametrize("host_gb", [0.5, 1, 2, 4, 8, 16, 64, 256])
def test_shared_buffers_never_exceed_a_tenth_of_host_memory(host_gb):
    host = int(host_gb * GB)
    for plan in PLANS:
        buffers = plan.shared_buffers_bytes(host)
        assert 16 * MB <= buffers <= host // 10
        assert buffers <= plan.ram_bytes // 4


def test_shared_buffers_are_a_quarter_of_the_plan_on_a_big_host():
    assert get_plan("db-s-1vcpu-1gb").shared_buffers_bytes(64 * GB) == 256 * MB
    assert get_plan("db-s-2vcpu-4gb").shared_buffers_bytes(64 * GB) == 1 * GB


def test_the_default_plan_exists_and_unknown_slugs_are_refused():
    assert get_plan(DEFAULT_PLAN_SLUG).ram_gb == 1
    with pytest.raises(ValueError, match="Unknown plan 'db-s-huge'"):
        get_plan("db-s-huge")


def test_plan_slugs_are_unique():
    assert len({plan.slug for plan in PLANS}) == len(PLANS)
