"""Why a task did not fit, as kube-scheduler counts it (reason -> number of nodes that
failed for it), and its words for that count."""

# Why a task did not fit: reason -> number of nodes that failed for it.
FitError = dict[str, int]


def histogram(reasons: dict[str, int]) -> str:
    """'2 Insufficient cpu, 1 node(s) didn't match node selector' (Kubernetes' wording)."""
    return ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))


def nodes_unavailable(nodes: int, reasons: dict[str, int]) -> str:
    """kube-scheduler's words: '0/4 nodes are available: 4 Insufficient cpu' (the
    counts are of nodes, which the bare histogram left the reader to guess)."""
    return f"0/{nodes} nodes are available: {histogram(reasons)}"
