"""The base class of the probability distributions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _capture, _core
from .._grad_mode import no_grad
from . import constraints

Tensor = _core.Tensor

__all__ = ["Distribution"]


class Distribution:
    """A probability distribution, as ``torch.distributions.Distribution``.

    ``batch_shape`` indexes independent (not identically distributed)
    distributions, ``event_shape`` is the shape of one draw. ``sample(s)``
    and ``rsample(s)`` return tensors of shape ``s + batch_shape +
    event_shape``; ``rsample`` is reparameterised (gradients flow to the
    parameters) where ``has_rsample``. ``log_prob(value)`` broadcasts
    ``value`` against ``batch_shape + event_shape`` and reduces the event
    dimensions.

    With ``validate_args`` (on by default, as in PyTorch; see
    :meth:`set_default_validate_args`) the parameters are checked against
    ``arg_constraints`` when constructed, and values given to ``log_prob``
    against ``support``; a violation raises ``ValueError`` naming the
    distribution and the argument. Sampling draws from ferrograd's default
    generator, so ``ferrograd.manual_seed`` makes it reproducible.
    """

    has_rsample: bool = False
    has_enumerate_support: bool = False
    _validate_args: bool = __debug__
    arg_constraints: dict[str, constraints.Constraint] = {}

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for distributions that do not say."""
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args expects True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(
        self,
        batch_shape: Sequence[int] = (),
        event_shape: Sequence[int] = (),
        validate_args: bool | None = None,
    ) -> None:
        self._batch_shape = tuple(int(n) for n in batch_shape)
        self._event_shape = tuple(int(n) for n in event_shape)
        if validate_args is not None:
            self._validate_args = bool(validate_args)
        if self._validate_args and not _capture.is_capturing():
            for param, constraint in self.arg_constraints.items():
                if isinstance(constraint, constraints._Dependent):
                    continue
                if param not in self.__dict__ and _is_lazy(type(self), param):
                    continue  # not given (e.g. logits when probs were)
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(
                        f"Expected parameter {param} (Tensor of shape {tuple(value.shape)}) of distribution "
                        f"{self!r} to satisfy the constraint {constraint!r}, but found invalid values:\n{value}"
                    )

    # ------------------------------------------------------------- shapes

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> tuple[int, ...]:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    def _extended_shape(self, sample_shape: Sequence[int] | int = ()) -> tuple[int, ...]:
        return _shape(sample_shape) + self._batch_shape + self._event_shape

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Distribution:
        """A distribution of the same kind with its parameters expanded to ``batch_shape``."""
        raise NotImplementedError(f"{type(self).__name__}.expand is not implemented")

    # -------------------------------------------------------------- moments

    @property
    def support(self) -> constraints.Constraint:
        """The constraint the samples satisfy."""
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        """The mean of the distribution."""
        raise NotImplementedError(f"{type(self).__name__}.mean is not implemented")

    @property
    def mode(self) -> Tensor:
        """The mode of the distribution."""
        raise NotImplementedError(f"{type(self).__name__}.mode is not implemented")

    @property
    def variance(self) -> Tensor:
        """The variance of the distribution."""
        raise NotImplementedError(f"{type(self).__name__}.variance is not implemented")

    @property
    def stddev(self) -> Tensor:
        """The standard deviation of the distribution."""
        return self.variance.sqrt()

    # ------------------------------------------------------------- sampling

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        """A sample (or a batch of samples of shape ``sample_shape``), without gradients."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        """A reparameterised sample: gradients flow to the parameters."""
        raise NotImplementedError(f"{type(self).__name__} does not implement rsample (has_rsample is False)")

    def sample_n(self, n: int) -> Tensor:
        """``n`` samples (deprecated in PyTorch: use ``sample((n,))``)."""
        return self.sample((n,))

    # -------------------------------------------------------------- density

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the probability density (or mass) at ``value``."""
        raise NotImplementedError(f"{type(self).__name__}.log_prob is not implemented")

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError(f"{type(self).__name__}.cdf is not implemented")

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse cumulative distribution function at ``value``."""
        raise NotImplementedError(f"{type(self).__name__}.icdf is not implemented")

    def entropy(self) -> Tensor:
        """The entropy, one value per batch element."""
        raise NotImplementedError(f"{type(self).__name__}.entropy is not implemented")

    def perplexity(self) -> Tensor:
        """``exp(entropy)``."""
        return self.entropy().exp()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """Every value of a discrete support, along a new leading dimension."""
        raise NotImplementedError(f"{type(self).__name__}.enumerate_support is not implemented")

    # ----------------------------------------------------------- validation

    def _validate_sample(self, value: Any) -> None:
        """Check ``value`` before ``log_prob``/``cdf``: a tensor whose shape
        broadcasts against ``batch_shape + event_shape`` (with the event
        dimensions matching exactly), in the support."""
        name = type(self).__name__
        if not isinstance(value, Tensor):
            raise ValueError(
                f"{name}: the value argument to log_prob must be a Tensor, got {type(value).__name__}"
            )
        shape = tuple(value.shape)
        ev = self._event_shape
        if len(shape) < len(ev) or (ev and shape[len(shape) - len(ev) :] != ev):
            raise ValueError(f"{name}: the right-most size of value must match event_shape: {shape} vs {ev}")
        actual = shape[: len(shape) - len(ev)]
        expected = self._batch_shape
        for i, j in zip(reversed(actual), reversed(expected), strict=False):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    f"{name}: value of shape {shape} cannot be broadcast with batch_shape {expected} "
                    f"and event_shape {ev}"
                )
        if _capture.is_capturing():
            return
        try:
            support = self.support
        except NotImplementedError:
            return
        if isinstance(support, constraints._Dependent):
            return
        if not bool(support.check(value).all()):
            raise ValueError(
                f"Expected value argument (Tensor of shape {shape}) to be within the support ({support!r}) "
                f"of the distribution {self!r}, but found invalid values:\n{value}"
            )

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        parts = []
        for k in names:
            v = self.__dict__[k]
            parts.append(f"{k}: {v if v.numel() == 1 else tuple(v.shape)}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _shape(sample_shape: Sequence[int] | int) -> tuple[int, ...]:
    if isinstance(sample_shape, int):
        return (sample_shape,)
    try:
        return tuple(int(n) for n in sample_shape)
    except TypeError:
        raise TypeError(f"sample_shape must be a sequence of ints, got {sample_shape!r}") from None


def _is_lazy(cls: type, name: str) -> bool:
    return isinstance(getattr(cls, name, None), lazy_property)


class lazy_property:  # noqa: N801 - PyTorch's name
    """A property computed on first access and then stored on the instance."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.__doc__ = fn.__doc__
        self.name = fn.__name__

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        value = self.fn(obj)
        obj.__dict__[self.name] = value
        return value
