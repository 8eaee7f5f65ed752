"""What changed since the simulator's controllers last looked (``SimBackend.touched``):
each controller works on what its own part of it names, not on the whole cluster."""

from dataclasses import dataclass, field
from typing import Any

VOLUME_KINDS = frozenset({"PersistentVolumeClaim", "PersistentVolume", "StorageClass"})


@dataclass(slots=True)
class Touched:
    """What changed since the controllers last looked: PodGroups by (namespace, name),
    whose pods or object changed, and Jobs by uid, whose pods changed; and for the
    admission's release of held Jobs, PodGroups whose object or Jobs changed. For the
    simulated PV controller (``kbatch.sim.volume_controller``): the claims by key
    (namespace/name) not yet seen Bound, whether a claim, PV or StorageClass was
    written since it last looked, and the pods made with generic ephemeral volumes."""

    groups: set[tuple[str, str]] = field(default_factory=set)
    jobs: set[str] = field(default_factory=set)
    holding: set[tuple[str, str]] = field(default_factory=set)
    # Jobs by uid: their pods removed before they finished, (name, told DisruptionTarget)
    lost: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)
    claims: set[str] = field(default_factory=set)
    volumes: bool = False
    ephemeral: list[tuple[str, str]] = field(default_factory=list)

    def created(self, kind: str, obj: dict[str, Any], new: bool) -> None:
        """``obj`` of ``kind`` was created (``new``) or replaced: note what the PV
        controller must look at (a cheap test for any other kind)."""
        if kind == "Pod":
            if new and _has_ephemeral((obj.get("spec") or {}).get("volumes")):
                meta = obj["metadata"]
                self.ephemeral.append((meta.get("namespace") or "default", meta["name"]))
            return
        if kind not in VOLUME_KINDS:
            return
        self.volumes = True
        meta = obj["metadata"]
        if kind == "PersistentVolumeClaim":
            if (obj.get("status") or {}).get("phase") != "Bound":
                self.claims.add(f"{meta.get('namespace') or 'default'}/{meta['name']}")
        elif kind == "PersistentVolume":
            ref = (obj.get("spec") or {}).get("claimRef")
            if isinstance(ref, dict) and ref.get("name"):  # (its claim's binding completes)
                self.claims.add(f"{ref.get('namespace') or 'default'}/{ref['name']}")


def _has_ephemeral(volumes: object) -> bool:
    return isinstance(volumes, list) and any(
        isinstance(v, dict) and v.get("ephemeral") is not None for v in volumes
    )
