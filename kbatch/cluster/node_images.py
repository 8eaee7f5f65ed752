"""The container images each node holds (``status.images``), for the image locality
score (``plugins.nodeorder``, kube-scheduler's ImageLocality).

A kubelet lists up to 50 of its images, with every name each goes by and its size.
The list changes whenever a pod pulls an image, far more often than anything else
kbatch reads of a Node. So it is kept here, beside the Node records, not in them: a
pull leaves the node's record, and with it the snapshot's node set and every score
cached on it, as they were (``kept_fields.reads_the_same``); the next snapshot
takes the newest sizes from here. The write is still passed on to the state's
observer (the flight recorder), so that a replay holds the same images.
"""

from collections.abc import Mapping
from typing import Any

from kbatch.cluster import fields

# Each node's images: name -> size in bytes, as its status lists them.
ImageSizes = Mapping[str, int]
NO_IMAGES: ImageSizes = {}


def read(obj: Mapping[str, Any]) -> ImageSizes:
    """The image sizes a Node's status lists, by each of their names; FieldError naming
    the field when an entry is not what the API server would hold. (A node lists up to
    50 images, each by a name or two, and a node is read at every write that changes
    it: plain loops, the field helpers only to word what is wrong.)"""
    status = obj.get("status")
    listed = status.get("images") if isinstance(status, Mapping) else None
    if not listed:
        return NO_IMAGES
    sizes = _read_quickly(listed)
    return sizes if sizes is not None else _read_strictly(obj)  # (raises, naming the field)


def _read_quickly(listed: object) -> dict[str, int] | None:
    """The sizes by name, or None at the first entry not as the API server holds it."""
    if type(listed) is not list:
        return None
    sizes: dict[str, int] = {}
    for image in listed:
        if type(image) is not dict:
            return None
        size, names = image.get("sizeBytes"), image.get("names")
        if size is None:
            size = 0
        if type(size) is not int or size < 0 or (names is not None and type(names) is not list):
            return None
        for name in names or ():
            if type(name) is not str or not name:
                return None
            sizes[name] = size
    return sizes


def _read_strictly(obj: Mapping[str, Any]) -> ImageSizes:
    sizes: dict[str, int] = {}
    for i, image in enumerate(fields.mappings(obj, "status.images")):
        where = f"status.images[{i}]"
        size = fields.integer(image, "sizeBytes", at=where) or 0
        if size < 0:
            raise fields.FieldError(f"{where}.sizeBytes", f"must not be negative, not {size}")
        for j, name in enumerate(fields.sequence(image, "names", at=where)):
            if not isinstance(name, str) or not name:
                why = f"must be an image's name, not {fields.shown(name)}"
                raise fields.FieldError(f"{where}.names[{j}]", why)
            sizes[name] = size
    return sizes


def normalized(image: str) -> str:
    """A container's image as a node lists it: with the tag ``latest`` when it names no
    tag (nor a digest), as kube-scheduler matches them."""
    if image.rfind(":") <= image.rfind("/"):
        return f"{image}:latest"
    return image


class NodeImages:
    """The newest image sizes of each node, by node name. A snapshot takes ``current``:
    the same dict while no node's images change, a new one after (never changed in
    place, so a session reads it while the watch goes on)."""

    def __init__(self) -> None:
        self._by_node: dict[str, ImageSizes] = {}
        self._listed: dict[str, Any] = {}  # each node's status.images as last read
        self._current: dict[str, ImageSizes] | None = None

    def written(self, node: str, obj: Mapping[str, Any]) -> bool:
        """Take in the images of the Node ``obj`` (read already by its record's parse);
        True if they changed. A list equal to the last one (a heartbeat's) is not read
        again."""
        status = obj.get("status")
        listed = status.get("images") if isinstance(status, Mapping) else None
        if listed == self._listed.get(node):
            return False
        self._listed[node] = listed
        sizes = read(obj)
        if self._by_node.get(node, NO_IMAGES) == sizes:
            return False
        self._by_node[node] = sizes
        self._current = None
        return True

    def dropped(self, node: str) -> None:
        self._listed.pop(node, None)
        if self._by_node.pop(node, None) is not None:
            self._current = None

    def current(self) -> Mapping[str, ImageSizes]:
        if self._current is None:
            self._current = {node: sizes for node, sizes in self._by_node.items() if sizes}
        return self._current
