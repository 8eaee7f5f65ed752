"""Kubernetes timestamps (RFC 3339) to and from epoch seconds: plain functions, no
models (what prints a served answer imports them without pydantic)."""

import math
from datetime import UTC, datetime


def rfc3339(seconds: float) -> str:
    """A Kubernetes timestamp (RFC 3339, whole seconds, UTC) for epoch ``seconds``."""
    return datetime.fromtimestamp(math.floor(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_seconds(text: str) -> float:
    """Epoch seconds of an RFC 3339 time with a zone (``Z`` or an offset); ValueError
    otherwise."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None or "T" not in text.upper():
        raise ValueError(f"{text!r} is not an RFC 3339 time (e.g. 2024-05-01T12:00:00Z)")
    return parsed.timestamp()
