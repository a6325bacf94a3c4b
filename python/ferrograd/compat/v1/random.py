"""``tf.random``: the TF 1.13+ names of the random ops."""

from __future__ import annotations

from typing import Any

from ._framework import Tensor
from ._ops import multinomial, set_random_seed, truncated_normal
from ._ops import random_normal as normal
from ._ops import random_shuffle as shuffle
from ._ops import random_uniform as uniform

__all__ = ["categorical", "normal", "set_random_seed", "set_seed", "shuffle", "truncated_normal", "uniform"]


def categorical(
    logits: Any, num_samples: int, dtype: Any = None, seed: Any = None, name: str | None = None
) -> Tensor:
    """``num_samples`` class indices per row of ``logits`` (int64 unless ``dtype``), drawn at each run."""
    return multinomial(logits, num_samples, seed, name, "int64" if dtype is None else dtype)


set_seed = set_random_seed
