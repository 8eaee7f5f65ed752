"""The replay's pure parts: what it reads of a recorded session's decisions and of a
recorded object, with no state of its own (``kbatch.record.replay`` runs them)."""

from typing import Any

from pydantic import BaseModel

from kbatch.operators.scheduler.core.framework.podgroup_status import iso_time
from kbatch.record.store import hooks
from kbatch.record.store.errors import RecordingError

STATUS_KINDS = frozenset({"PodGroup", "Queue"})


def published(
    decisions: hooks.Decisions, dumped: dict[str, Any]
) -> dict[tuple[str, str], tuple[Any, BaseModel]]:
    """A session's PodGroup and Queue statuses by kind and object: each as dumped
    (``recorder.decisions_json``) and its model."""
    published: dict[tuple[str, str], tuple[Any, BaseModel]] = {}
    for kind, models, dumps in (
        ("PodGroup", decisions[3], dumped["groups"]),
        ("Queue", decisions[4], dumped["queues"]),
    ):
        for (key, model), (_, dump) in zip(models, dumps, strict=True):
            published[(kind, key)] = (dump, model)
    return published


def recorded_session_uid(recorded: dict[str, Any], now: float) -> str:
    """The id the recorded session gave the PodGroup conditions it set (their
    transitionID: those whose lastTransitionTime is the session's time), to give the
    replayed session the same, so that its statuses are the recorded ones field for
    field; "" when its decisions do not tell. (A condition that kept a time of the same
    second from an earlier session may tell another id: then the statuses differ in
    that id alone, which the comparison leaves out, and are validated as recorded.)"""
    stamp = iso_time(now)
    for _, status in recorded.get("groups") or ():
        if type(status) is not dict:
            continue
        for condition in status.get("conditions") or ():
            if type(condition) is dict and condition.get("lastTransitionTime") == stamp:
                return str(condition.get("transitionID") or "")
    return ""


def namespace_name(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    if type(meta) is not dict:
        return "", ""
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def sharing_held_parts(obj: dict[str, Any], held: dict[str, Any] | None) -> dict[str, Any]:
    """``obj`` (a pod, decoded anew) with each of its parts, and each part of its spec,
    that equals the same part of ``held`` (the state's version of the pod) replaced by
    that very part. Live, a pod whose status or node alone was written shares its other
    parts with the version before (a simulated bind, a kubelet's report), and the state
    then keeps the rest of its record instead of parsing it whole
    (``pod_records.parse_pod``); decoded from a recording no part is shared, so every
    status write was parsed whole. Equal parts read the same, and the state changes no
    part it holds in place, so the records and decisions are the same."""
    if held is None:
        return obj
    for key, part in list(obj.items()):
        if key not in held or held[key] is part:
            continue
        old = held[key]
        if part == old:
            obj[key] = old
        elif key == "spec" and type(part) is dict and type(old) is dict:
            for name, value in list(part.items()):
                if name in old and value == old[name]:
                    part[name] = old[name]
    return obj


def statuses(pairs: list[list[Any]]) -> dict[str, Any]:
    """Statuses by object, each condition without its transitionID: the id of the
    session that wrote it, a random one live, which names the session, not a decision."""
    shown = {}
    for key, status in pairs:
        if isinstance(status, dict) and isinstance(status.get("conditions"), list):
            conditions = [
                {k: v for k, v in c.items() if k != "transitionID"} if isinstance(c, dict) else c
                for c in status["conditions"]
            ]
            status = {**status, "conditions": conditions}
        shown[str(key)] = status
    return shown


def assumed_ttl(recorded: Any) -> float | None:
    """How long the recorded state kept a confirmed bind or eviction assumed: seconds, or
    None for until the watch showed it (the header's ``assumed_ttl``)."""
    if recorded is None:
        return None
    if isinstance(recorded, bool) or not isinstance(recorded, int | float):
        raise RecordingError(
            f"the header's assumed_ttl: a number of seconds or null, not {recorded!r}"
        )
    return float(recorded)
