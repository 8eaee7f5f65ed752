"""Water-filling by weight: an amount of each resource split between claimants.

Each claimant gets ``weight × level`` of a resource, but at most its limit, at the
highest level the amount allows: claimants are met in the order of limit/weight,
and from the first one that would not be met, the rest share what is left by
weight. Resources do not interact: each is filled on its own, exactly (no rounds
that reach the level only in the limit).

This is the arithmetic of the flat ``proportion`` plugin's deserved shares, step
for step (the same IEEE operations in the same order, so the same bits), done
for every resource at once: the queue tree (``queue_tree``) fills each parent's
children with it.
"""

import numpy as np


def weighted_fill(total: np.ndarray, weights: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """``total`` (one amount per resource) split between claimants by ``weights`` (one
    each, at least 1), each getting at most its row of ``limits`` (claimants × resources):
    a (claimants × resources) array. A negative total is nothing to share."""
    count, dims = limits.shape
    if count == 0:
        return np.zeros((0, dims))
    weight = np.asarray(weights, dtype=float)
    limit = np.asarray(limits, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        ratio = limit / weight[:, None]
        order = np.argsort(ratio, axis=0, kind="stable")  # NaN last, ties as given
        met = np.take_along_axis(limit, order, axis=0)  # limits, in the order met
        weight_in_order = weight[order]
        amount = np.asarray(total, dtype=float)
        start = np.where(amount < 0.0, 0.0, amount)  # max(total, 0), keeping total's bits
        # What is left before each claimant's turn, and the weight not yet met: one
        # subtraction after another, as a loop over the claimants would do them.
        left = np.subtract.accumulate(np.vstack([start, met[:-1]]), axis=0)
        weight_sum = np.full(dims, float(weight.sum()))
        open_weight = np.subtract.accumulate(np.vstack([weight_sum, weight_in_order[:-1]]), axis=0)
        short = met * open_weight > left * weight_in_order  # not met at this level
        first_short = np.where(short.any(axis=0), short.argmax(axis=0), count)
        at = np.minimum(first_short, count - 1)[None, :]
        level_left = np.take_along_axis(left, at, axis=0)
        level_weight = np.take_along_axis(open_weight, at, axis=0)
        shared = level_left * weight_in_order / level_weight
    turn = np.arange(count)[:, None]
    filled = np.where(turn < first_short[None, :], met, shared)
    out = np.empty_like(filled)
    np.put_along_axis(out, order, filled, axis=0)
    return out
