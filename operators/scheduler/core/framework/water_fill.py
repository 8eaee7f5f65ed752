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


def deserved_shares(
    total: np.ndarray,
    weights: dict[str, int],
    requests: dict[str, np.ndarray],
    capabilities: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Water-filling of ``total`` between flat queues by weight (the ``proportion``
    plugin's deserved shares).

    A queue never gets more than min(request, capability) in any dimension, and
    what one does not take is shared again among the others. Dimensions do not
    interact (a queue capped in one still shares the others by weight), so each
    is filled on its own, exactly: the kube-batch loop of rounds reaches the same
    level only in the limit, and stopped early it left room undistributed.
    """
    names = list(weights)
    if not names:
        return {}
    weight = np.array([float(weights[n]) for n in names])
    limits = np.minimum(
        np.array([requests[n] for n in names], dtype=float),
        np.array([capabilities[n] for n in names], dtype=float),
    )
    ratios = (limits / weight[:, None]).T.tolist()
    weights_of, weight_sum = weight.tolist(), float(weight.sum())
    filled = [
        _fill(amount, weights_of, weight_sum, limit, ratio)
        for amount, limit, ratio in zip(
            np.asarray(total, dtype=float).tolist(), limits.T.tolist(), ratios, strict=True
        )
    ]
    deserved = np.array(filled, dtype=float).reshape(len(filled), len(names)).T.copy()
    return {name: deserved[i] for i, name in enumerate(names)}


def _fill(
    total: float, weight: list[float], weight_sum: float, limit: list[float], ratio: list[float]
) -> list[float]:
    """One dimension: each queue gets ``weight × level`` but at most its ``limit``, at the
    highest level ``total`` allows. Queues are met in order of limit/weight (``ratio``);
    from the first one that would not be met, the rest share what is left by weight.
    In Python floats: each step is the IEEE operation numpy does on its scalars, so the
    same bits, without numpy's cost per element (``weight_sum`` as numpy adds it up;
    weights are at least 1, as the API has them)."""
    out = [0.0] * len(limit)
    left, open_weight = max(total, 0.0), weight_sum
    if any(r != r for r in ratio):  # NaN: numpy's order (last)
        order: list[int] = np.argsort(np.array(ratio), kind="stable").tolist()
    else:  # (a stable sort: ties in the queues' order, as numpy's)
        order = sorted(range(len(ratio)), key=ratio.__getitem__)
    for k, i in enumerate(order):
        if limit[i] * open_weight > left * weight[i]:
            for j in order[k:]:
                out[j] = left * weight[j] / open_weight
            break
        out[i] = limit[i]
        left -= limit[i]
        open_weight -= weight[i]
    return out
