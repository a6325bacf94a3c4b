"""``tf.errors``: the exceptions a TF1 run raises."""

from __future__ import annotations

from ._framework import FailedPreconditionError, InvalidArgumentError, NotFoundError, OpError, OutOfRangeError

__all__ = ["FailedPreconditionError", "InvalidArgumentError", "NotFoundError", "OpError", "OutOfRangeError"]
