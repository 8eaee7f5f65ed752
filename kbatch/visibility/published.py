"""The ETA as it is published on a waiting PodGroup, and read back.

``kbatch run`` (``kbatch.visibility.publisher``) puts each waiting PodGroup's estimate
on it as a condition, so that ``kubectl describe`` shows it and ``kbatch jobs --eta``
need not simulate:

- ``type``: ``kbatch.io/EstimatedStart``;
- ``status``: ``True`` when a start time is known, ``Unknown`` when not (the forecast
  stopped before it started, or it waits for work with no known runtime);
- ``reason``: ``HighConfidence``, ``MediumConfidence``, ``LowConfidence``, ``LaterThan``
  or ``Unknown``;
- ``message``: ``starts at <RFC 3339>: <the estimate in words>``, ``not before <RFC
  3339>: ...`` or ``unknown: ...``, the words those of ``kbatch explain --eta``;
- ``lastTransitionTime``: when the estimate was made. It is *fresh* for ``FRESH_SECONDS``
  after that: the publisher makes one every ``--eta-interval`` (30 s by default) and
  writes it again when it moves or is half that old, so a fresh condition is the
  publisher's current answer; an older one is from a scheduler that stopped
  publishing, and a reader computes its own.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kbatch.cluster import records
from kbatch.config import ETA_FRESH_SECONDS
from kbatch.visibility.rows import Estimate, human

CONDITION = "kbatch.io/EstimatedStart"
FRESH_SECONDS = ETA_FRESH_SECONDS  # an estimate older than this is not read back
REASONS = {"high": "HighConfidence", "medium": "MediumConfidence", "low": "LowConfidence"}
CONFIDENCE_OF = {reason: confidence for confidence, reason in REASONS.items()}
_STARTS = re.compile(r"^(starts at|not before) (\S+?): (.*)$", re.DOTALL)


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition_of(estimate: Estimate, now: float) -> dict[str, str]:
    """The condition telling ``estimate``, made at ``now`` (epoch seconds)."""
    if estimate.seconds is not None:
        status, reason = "True", REASONS.get(estimate.confidence, "LowConfidence")
        message = f"starts at {iso(now + estimate.seconds)}: {estimate.text}"
    elif estimate.later_than is not None:
        status, reason = "Unknown", "LaterThan"
        message = f"not before {iso(now + estimate.later_than)}: {estimate.text}"
    else:
        status, reason, message = "Unknown", "Unknown", estimate.text
    return {
        "type": CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": iso(now),
    }


def same_estimate(old: Mapping[str, Any] | None, new: Mapping[str, str], tolerance: float) -> bool:
    """Does ``old`` (as published) still tell ``new``: the same reason, and a start time
    within ``tolerance`` seconds (an estimate moves by a step or so from one forecast to
    the next; writing each move would be a PodGroup write a group a round)?"""
    if old is None or old.get("reason") != new["reason"] or old.get("status") != new["status"]:
        return False
    before, after = _time_of(str(old.get("message") or "")), _time_of(new["message"])
    if before is None or after is None:
        return old.get("message") == new["message"]
    return abs(before - after) <= tolerance


def _time_of(message: str) -> float | None:
    match = _STARTS.match(message)
    if match is None:
        return None
    try:
        return records.timestamp(match.group(2))
    except ValueError:
        return None


def find(conditions: Sequence[Mapping[str, Any]] | None) -> Mapping[str, Any] | None:
    for condition in conditions or ():
        if condition.get("type") == CONDITION:
            return condition
    return None


@dataclass(frozen=True)
class Published:
    """An estimate read off a PodGroup: as of ``made`` (epoch seconds)."""

    estimate: Estimate
    made: float


def read(pod_group: Mapping[str, Any], now: float, max_age: float) -> Published | None:
    """The estimate published on ``pod_group`` when it is at most ``max_age`` seconds old
    at ``now``, seen from ``now`` (a start 10 minutes after an estimate made 2 minutes
    ago is 8 minutes away); None when there is none, it is older, or it cannot be read."""
    condition = find((pod_group.get("status") or {}).get("conditions"))
    return None if condition is None else read_condition(condition, now, max_age)


def read_condition(condition: Mapping[str, Any], now: float, max_age: float) -> Published | None:
    """``read`` of the condition itself (one ``condition_of`` made, carried or not)."""
    try:
        made = records.timestamp(condition.get("lastTransitionTime"))
    except ValueError:
        return None
    age = now - made
    if age > max_age or age < -max_age:
        return None
    message = str(condition.get("message") or "")
    reason = condition.get("reason")
    match = _STARTS.match(message)
    published = f" (published {human(max(age, 0.0))} ago)"
    if match is None:
        if reason != "Unknown":
            return None
        estimate = Estimate(None, "unknown", message + published, "none", published=made)
        return Published(estimate, made)
    at = _time_of(message)
    if at is None:
        return None
    words = match.group(3)
    left = max(at - now, 0.0)
    if match.group(1) == "not before":
        text = f"later than {human(left)}{published}"
        later = Estimate(None, f">{human(left)}", text, "none", later_than=left, published=made)
        return Published(later, made)
    confidence = CONFIDENCE_OF.get(str(reason), "low")
    when = "now" if left == 0 else f"~{human(left)}"
    text = f"{when}, at {iso(at)}{published}: {words}"
    return Published(Estimate(left, when, text, confidence, published=made), made)
