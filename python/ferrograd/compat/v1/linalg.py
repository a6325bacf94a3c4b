"""``tf.linalg``: matrix ops over the last two dims."""

from __future__ import annotations

from ._ops import eye, matmul, norm, trace, transpose
from ._ops import matrix_determinant as det
from ._ops import matrix_diag_part as diag_part
from ._ops import matrix_inverse as inv

__all__ = ["det", "diag_part", "eye", "inv", "matmul", "norm", "trace", "transpose"]
