"""``torch.backends``-style switches that training scripts set.

They are accepted so that such scripts run unchanged, and have no effect:
ferrograd has no cuDNN, CUDA or MPS backend.

- ``backends.cudnn.benchmark``, ``.deterministic``, ``.enabled``,
  ``.allow_tf32``: plain attributes (defaults ``False``, ``False``, ``True``,
  ``True``). For reproducible results ferrograd has
  ``fg.use_deterministic_algorithms`` (``cudnn.deterministic`` does not
  switch it). ``cudnn.is_available()`` is ``False``.
- ``backends.cuda.matmul.allow_tf32``: a plain attribute (``False``);
  ``cuda.is_built()`` is ``False``.
- ``backends.mps.is_available()`` and ``mps.is_built()`` are ``False``.
"""

from . import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
