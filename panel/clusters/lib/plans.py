"""Plan sizes and the connection arithmetic of the managed service (pure, no Django)."""

from __future__ import annotations

from dataclasses import dataclass

from panel.core.errors import N_, ServiceError

CONNECTIONS_PER_GB = 25
SUPERUSER_RESERVED_CONNECTIONS = 3
MAX_POOL_CONNECTIONS = 997


@dataclass(frozen=True)
class Plan:
    """A plan: vCPUs, RAM and disk, and the connection limits they imply."""

    slug: str
    vcpus: int
    ram_gb: int
    disk_gb: int

    @property
    def max_connections(self) -> int:
        return min(CONNECTIONS_PER_GB * self.ram_gb, MAX_POOL_CONNECTIONS + SUPERUSER_RESERVED_CONNECTIONS)

    @property
    def pool_connections(self) -> int:
        """Connections available to pools: 25 × GB − 3, capped at 997."""
        return min(self.max_connections - SUPERUSER_RESERVED_CONNECTIONS, MAX_POOL_CONNECTIONS)

    @property
    def ram_bytes(self) -> int:
        return self.ram_gb * 1024**3

    @property
    def disk_bytes(self) -> int:
        return self.disk_gb * 1024**3

    def smaller_than(self, other: Plan) -> bool:
        """Less RAM, vCPUs or disk than ``other``: too small for a read-only replica of a cluster
        on ``other`` (its max_connections and replayed settings must fit, and the data)."""
        return self.ram_gb < other.ram_gb or self.vcpus < other.vcpus or self.disk_gb < other.disk_gb

    def shared_buffers_bytes(self, host_memory_bytes: int) -> int:
        """A quarter of the plan's RAM, but never more than a tenth of the host's memory."""
        wanted = self.ram_bytes // 4
        affordable = host_memory_bytes // 10
        floor = 16 * 1024**2
        return max(floor, min(wanted, affordable))


PLANS: tuple[Plan, ...] = (
    Plan("db-s-1vcpu-1gb", 1, 1, 10),
    Plan("db-s-1vcpu-2gb", 1, 2, 25),
    Plan("db-s-2vcpu-4gb", 2, 4, 38),
    Plan("db-s-4vcpu-8gb", 4, 8, 115),
    Plan("db-s-6vcpu-16gb", 6, 16, 270),
    Plan("db-s-8vcpu-32gb", 8, 32, 580),
    Plan("db-s-16vcpu-64gb", 16, 64, 1120),
)
PLANS_BY_SLUG = {plan.slug: plan for plan in PLANS}
DEFAULT_PLAN_SLUG = "db-s-1vcpu-1gb"


def get_plan(slug: str) -> Plan:
    try:
        return PLANS_BY_SLUG[slug]
    except KeyError:
        raise ValueError(f"Unknown plan {slug!r}; choose one of {', '.join(PLANS_BY_SLUG)}") from None


def require_plan(slug: str, field: str = "plan") -> Plan:
    """``get_plan`` for a plan a user named (create, restore, resize, a replica): an unknown slug is
    the refusal that lists the plans there are."""
    try:
        return get_plan(slug)
    except ValueError:
        raise ServiceError(
            N_("Unknown plan %(plan)s; choose one of %(plans)s"),
            field=field,
            code="cluster.plan_unknown",
            params={"plan": repr(slug), "plans": ", ".join(PLANS_BY_SLUG)},
        ) from None
