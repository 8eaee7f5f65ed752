"""What a session did: its counts and timings, for metrics and the simulator's summary."""

from dataclasses import dataclass, field


@dataclass(slots=True)
class SessionStats:
    """What a session did, for metrics and the simulator's summary."""

    binds: int = 0
    evictions: int = 0
    preemption_attempts: int = 0
    preemption_victims: int = 0
    attempts: dict[str, int] = field(default_factory=lambda: {"scheduled": 0, "unschedulable": 0})
    e2e_seconds: float = 0.0
    task_latencies: list[float] = field(default_factory=list)  # pod created -> bound, seconds
    action_seconds: dict[str, float] = field(default_factory=dict)
    plugin_open_seconds: dict[str, float] = field(default_factory=dict)
    plugin_close_seconds: dict[str, float] = field(default_factory=dict)
