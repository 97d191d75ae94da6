"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, from gathers and sums."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..graph import T
from ..node import Node
from ..registry import onnx_op
from .util import where


def nll(n: Node, log_prob: T, target: T, weight: T | None) -> T:
    """-log_prob[n, target[n, ...], ...] * weight[target], reduced as the node says; entries
    whose target is ignore_index count neither in the sum nor in the mean's divisor."""
    reduction = n.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise n.unsupported(f"attribute 'reduction' = {reduction!r}")
    if log_prob.rank < 2 or target.rank != log_prob.rank - 1:
        raise n.error(ShapeError, f"input {log_prob.type} must be N, C, ... and target {target.type} N, ...")
    ignore = n.attr("ignore_index", None)
    target = target.cast(np.int64)
    ignored = target.eq(ignore) if ignore is not None else None
    safe = where(ignored, target._lift(0), target) if ignored is not None else target
    picked = n.g.op("np.take_along_axis", log_prob, n.g.op("np.expand_dims", safe, axes=(1,)), axis=1)
    picked = n.g.op("np.squeeze", picked, axes=(1,))
    w = n.g.op("np.take", weight, safe, axis=0) if weight is not None else None
    if ignored is not None:
        zero = log_prob._lift(0)
        w = where(ignored, zero, w if w is not None else log_prob._lift(1))
    loss = -picked if w is None else -picked * w
    if reduction == "none":
        return loss
    axes = tuple(range(loss.rank))
    total = loss.reduce("sum", axes)
    if reduction == "sum":
        return total
    return total / w.reduce("sum", axes) if w is not None else loss.reduce("mean", axes)


@onnx_op("NegativeLogLikelihoodLoss", 12, 13, 22)
def negative_log_likelihood_loss(n: Node) -> T:
    return nll(n, n.input(0), n.input(1), n.input(2, required=False))


@onnx_op("SoftmaxCrossEntropyLoss", 12, 13)
def softmax_cross_entropy_loss(n: Node):
    scores = n.input(0)
    log_prob = n.g.op("np.log_softmax", scores, axis=1)
    return nll(n, log_prob, n.input(1), n.input(2, required=False)), log_prob
