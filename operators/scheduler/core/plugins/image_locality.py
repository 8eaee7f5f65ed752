"""Image locality, as kube-scheduler's ImageLocality scores it: a node that already
holds a pod's container images starts it sooner (no pull), so it scores higher.

For each of the pod's containers (init containers too) whose image the node lists
(``Snapshot.node_images``), the image's size counts, scaled by the share of all nodes
that list it: an image every node holds counts in full, one a single node of many
holds counts little, so that pods of one image are not all heaped on the node that
pulled it first. The sum, clamped to 23 MiB .. 1000 MiB per container, is scaled to
0..10 in kube-scheduler's whole steps (its 0..100 integer score, over 10).

The images a node lists change only between snapshots, so a score holds for a
whole session: worked out once per set of images over all nodes, then read.
"""

from collections.abc import Mapping

import numpy as np

from kbatch.operators.scheduler.core.framework.nodes import NodeSet

MIB = 1024 * 1024
MIN_THRESHOLD = 23 * MIB
MAX_CONTAINER_THRESHOLD = 1000 * MIB
MAX_SCORE = 10.0
_STEPS = 100  # kube-scheduler's MaxNodeScore: its scores are whole numbers up to it

_NO_IMAGES: Mapping[str, int] = {}


def priority(summed: np.ndarray, containers: int) -> np.ndarray:
    """The score (0..10, in steps of 0.1) of the summed scaled sizes of a pod with
    ``containers`` containers."""
    top = MAX_CONTAINER_THRESHOLD * max(containers, 1)
    clamped = np.clip(summed, MIN_THRESHOLD, top)
    steps = np.floor(_STEPS * (clamped - MIN_THRESHOLD) / (top - MIN_THRESHOLD))
    return steps * (MAX_SCORE / _STEPS)


class ImageScores:
    """A session's image locality scores over all its nodes, by the images asked."""

    def __init__(self, nodes: NodeSet, node_images: Mapping[str, Mapping[str, int]]) -> None:
        self._nodes, self._node_images = nodes, node_images
        self._listed: list[Mapping[str, int]] | None = None  # per node row, when first asked
        self._scaled: dict[str, np.ndarray] = {}
        self._scores: dict[tuple[str, ...], np.ndarray] = {}

    def scores(self, images: tuple[str, ...]) -> np.ndarray:
        """The score of each node for a pod whose containers' images are ``images``
        (as ``node_images.normalized`` gives them)."""
        found = self._scores.get(images)
        if found is None:
            summed = np.zeros(len(self._nodes.names))
            for image in images:
                summed += self._scaled_size(image)
            found = self._scores[images] = priority(summed, len(images))
        return found

    def _scaled_size(self, image: str) -> np.ndarray:
        """Per node, the size of ``image`` if it lists it, times the share of nodes that
        do (truncated to whole bytes, as kube-scheduler does)."""
        found = self._scaled.get(image)
        if found is None:
            if self._listed is None:
                images = self._node_images
                self._listed = [images.get(name, _NO_IMAGES) for name in self._nodes.names]
            listed = [sizes.get(image) for sizes in self._listed]
            present = np.array([size is not None for size in listed])
            sizes = np.array([size or 0 for size in listed], dtype=np.float64)
            share = present.sum() / max(len(listed), 1)
            found = self._scaled[image] = np.floor(sizes * share)
        return found
