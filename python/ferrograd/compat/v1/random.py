"""``tf.random``: the TF 1.13+ names of the random ops."""

from __future__ import annotations

from ._ops import random_normal as normal
from ._ops import random_uniform as uniform
from ._ops import set_random_seed, truncated_normal

__all__ = ["normal", "set_random_seed", "set_seed", "truncated_normal", "uniform"]

set_seed = set_random_seed
