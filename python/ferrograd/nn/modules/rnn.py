"""Recurrent layers: ``RNNCell``, ``LSTMCell``, ``GRUCell`` and the multi-layer ``RNN``, ``LSTM``, ``GRU``.

The sequence layers loop over time steps in Python (the input projections
of all steps are computed in one matmul first), so sequences of any length
work; each step is a few registry ops and autograd sees the unrolled graph.
"""

from __future__ import annotations

import math
from typing import Any

from ... import _core
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, _padded_sorted
from .module import Module

Tensor = _core.Tensor

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _step(
    mode: str, xp: Tensor, h: Tensor, c: Tensor | None, w_hh: Tensor, b_hh: Tensor | None
) -> tuple[Tensor, Tensor | None]:
    """One recurrence step given the input projection ``xp = x @ W_ih.T + b_ih``."""
    hp = F.linear(h, w_hh, b_hh)
    if mode == "RNN_TANH":
        return (xp + hp).tanh(), None
    if mode == "RNN_RELU":
        return (xp + hp).relu(), None
    if mode == "LSTM":
        i, f, g, o = (xp + hp).chunk(4, -1)
        c_new = f.sigmoid() * c + i.sigmoid() * g.tanh()
        return o.sigmoid() * c_new.tanh(), c_new
    # GRU
    xr, xz, xn = xp.chunk(3, -1)
    hr, hz, hn = hp.chunk(3, -1)
    r = (xr + hr).sigmoid()
    z = (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return n + z * (h - n), None  # (1 - z) * n + z * h


class RNNCellBase(Module):
    """The base class of :class:`RNNCell`, :class:`LSTMCell` and :class:`GRUCell`, as
    ``torch.nn.RNNCellBase``.

    Parameters ``weight_ih`` ``(num_chunks * hidden_size, input_size)``, ``weight_hh``
    ``(num_chunks * hidden_size, hidden_size)``, ``bias_ih``, ``bias_hh``, all drawn from
    U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)). The subclasses define ``forward``.
    """

    _mode: str = ""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool,
        num_chunks: int,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        dtype = dtype or _core.get_default_dtype()
        g = num_chunks * hidden_size
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(_core.empty((g, input_size), dtype=dtype))
        self.weight_hh = Parameter(_core.empty((g, hidden_size), dtype=dtype))
        if bias:
            self.bias_ih = Parameter(_core.empty((g,), dtype=dtype))
            self.bias_hh = Parameter(_core.empty((g,), dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """Draw every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _prepare(self, input: Tensor, hx: Tensor | None) -> tuple[Tensor, Tensor | None, bool]:
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: expected input to be 1-D or 2-D, got {input.dim()}-D")
        if input.shape[-1] != self.input_size:
            raise ValueError(
                f"{name}: input has inconsistent input_size: got {input.shape[-1]} expected {self.input_size}"
            )
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
            if hx is not None:
                hx = hx.unsqueeze(0)
        return input, hx, batched

    def _zeros(self, input: Tensor) -> Tensor:
        return _core.zeros((input.shape[0], self.hidden_size), dtype=input.dtype, device=input.device)

    def _check_hidden(self, h: Tensor, input: Tensor, what: str) -> None:
        if tuple(h.shape) != (input.shape[0], self.hidden_size):
            raise ValueError(
                f"{type(self).__name__}: {what} must have shape {(input.shape[0], self.hidden_size)}, got {tuple(h.shape)}"
            )

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if self._mode == "RNN_RELU":
            s += ", nonlinearity=relu"
        return s


class RNNCell(RNNCellBase):
    """Elman RNN cell: ``h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)`` (or ReLU)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r} (use 'tanh' or 'relu')")
        self.nonlinearity = nonlinearity
        self._mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """One step: ``input`` ``(N, input_size)`` (or unbatched), ``hx`` ``(N, hidden_size)`` (default zeros)."""
        x, h, batched = self._prepare(input, hx)
        h = self._zeros(x) if h is None else h
        self._check_hidden(h, x, "hx")
        out, _ = _step(
            self._mode, F.linear(x, self.weight_ih, self.bias_ih), h, None, self.weight_hh, self.bias_hh
        )
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """LSTM cell: gates ``i, f, g, o`` from ``x W_ihᵀ + b_ih + h W_hhᵀ + b_hh``;
    ``c' = σ(f) c + σ(i) tanh(g)``, ``h' = σ(o) tanh(c')``."""

    _mode = "LSTM"

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """One step; ``hx = (h, c)`` (default zeros). Returns ``(h', c')``."""
        if hx is None:
            x, _, batched = self._prepare(input, None)
            h = c = self._zeros(x)
        else:
            x, h, batched = self._prepare(input, hx[0])
            c = hx[1] if batched else hx[1].unsqueeze(0)
        self._check_hidden(h, x, "h")
        self._check_hidden(c, x, "c")
        h2, c2 = _step("LSTM", F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)
        assert c2 is not None
        return (h2, c2) if batched else (h2.squeeze(0), c2.squeeze(0))


class GRUCell(RNNCellBase):
    """GRU cell: ``r = σ(..)``, ``z = σ(..)``, ``n = tanh(x W_inᵀ + b_in + r (h W_hnᵀ + b_hn))``,
    ``h' = (1 - z) n + z h``."""

    _mode = "GRU"

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """One step: ``input`` ``(N, input_size)`` (or unbatched), ``hx`` ``(N, hidden_size)`` (default zeros)."""
        x, h, batched = self._prepare(input, hx)
        h = self._zeros(x) if h is None else h
        self._check_hidden(h, x, "hx")
        out, _ = _step(
            "GRU", F.linear(x, self.weight_ih, self.bias_ih), h, None, self.weight_hh, self.bias_hh
        )
        return out if batched else out.squeeze(0)


class RNNBase(Module):
    """Stacked (optionally bidirectional) recurrent layers with PyTorch's parameter names: the
    base class of :class:`RNN`, :class:`LSTM` and :class:`GRU`, as ``torch.nn.RNNBase``.

    ``mode`` is ``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"`` or ``"GRU"``. Parameters per layer
    ``k`` and direction: ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``,
    ``bias_hh_l{k}`` (suffix ``_reverse`` for the backward direction). ``proj_size`` must be
    0 (LSTM projections are not supported). The subclasses define ``forward``.
    """

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if mode not in _GATES:
            raise ValueError(f"{name}: unrecognized RNN mode {mode!r} (use one of {', '.join(_GATES)})")
        if proj_size:
            raise NotImplementedError(f"{name}: proj_size is not supported")
        if num_layers < 1:
            raise ValueError(f"{name}: num_layers must be at least 1, got {num_layers}")
        if not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout must be a number in [0, 1], got {dropout}")
        dtype = dtype or _core.get_default_dtype()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        dirs = 2 if bidirectional else 1
        g = _GATES[mode] * hidden_size
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            in_size = input_size if layer == 0 else hidden_size * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")
                shapes = [(f"weight_ih{sfx}", (g, in_size)), (f"weight_hh{sfx}", (g, hidden_size))]
                if bias:
                    shapes += [(f"bias_ih{sfx}", (g,)), (f"bias_hh{sfx}", (g,))]
                for pname, shape in shapes:
                    setattr(self, pname, Parameter(_core.empty(shape, dtype=dtype)))
                    self._flat_weights_names.append(pname)
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """Draw every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """Does nothing: PyTorch packs the weights into one cuDNN buffer here; ferrograd
        reads each parameter where it is, so there is nothing to repack."""

    def _weights(self, layer: int, d: int) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")
        get = self._parameters.get
        return get(f"weight_ih{sfx}"), get(f"weight_hh{sfx}"), get(f"bias_ih{sfx}"), get(f"bias_hh{sfx}")

    def _run(self, input: Tensor | PackedSequence, hx: Any) -> tuple[Tensor | PackedSequence, Any]:
        name = type(self).__name__
        is_lstm = self.mode == "LSTM"
        packed = input if isinstance(input, PackedSequence) else None
        masks: list[Tensor] = []
        if packed is not None:
            # Run the padded batch (sorted by length) and keep each sequence's state once it has
            # ended: step t updates only the first batch_sizes[t] rows, so the reverse direction
            # starts each sequence at its own last element.
            input, _ = _padded_sorted(packed, 0.0, None)
            sizes = [int(v) for v in packed.batch_sizes.tolist()]
            rows = _core.arange(input.shape[1], device=input.device).reshape((-1, 1))
            masks = [rows < bs for bs in sizes]
            if hx is not None and packed.sorted_indices is not None:
                idx = packed.sorted_indices.to(input.device)
                hx = tuple(h.index_select(1, idx) for h in hx) if is_lstm else hx.index_select(1, idx)
        elif input.dim() not in (2, 3):
            raise ValueError(f"{name}: expected input to be 2-D (unbatched) or 3-D, got {input.dim()}-D")
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first and packed is None:
            input = input.transpose(0, 1)
        # now (L, N, input_size)
        seq_len, n, in_size = input.shape
        if in_size != self.input_size:
            raise ValueError(
                f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, got {in_size}"
            )
        dirs = 2 if self.bidirectional else 1
        want = (self.num_layers * dirs, n, self.hidden_size)
        if hx is None:
            h0 = _core.zeros(want, dtype=input.dtype, device=input.device)
            c0 = h0 if is_lstm else None
        else:
            h0, c0 = hx if is_lstm else (hx, None)
            if not batched:
                h0 = h0.unsqueeze(1)
                c0 = c0.unsqueeze(1) if c0 is not None else None
            for what, t in (("h_0", h0), ("c_0", c0)):
                if t is not None and tuple(t.shape) != want:
                    raise ValueError(f"{name}: expected {what} of shape {want}, got {tuple(t.shape)}")
        h0s, c0s = h0.unbind(0), (c0.unbind(0) if c0 is not None else None)

        layer_in = input
        h_n: list[Tensor] = []
        c_n: list[Tensor] = []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, d)
                idx = layer * dirs + d
                h = h0s[idx]
                c = c0s[idx] if c0s is not None else None
                xp = F.linear(layer_in, w_ih, b_ih).unbind(0)  # input projections of every step at once
                steps = range(seq_len - 1, -1, -1) if d == 1 else range(seq_len)
                ys: list[Tensor] = [None] * seq_len  # type: ignore[list-item]
                for t in steps:
                    h_new, c_new = _step(self.mode, xp[t], h, c, w_hh, b_hh)
                    if masks:
                        ys[t] = h_new
                        h = _core.where(masks[t], h_new, h)
                        c = _core.where(masks[t], c_new, c) if c is not None else None
                    else:
                        h, c = h_new, c_new
                        ys[t] = h
                outs.append(
                    _core.stack(ys)
                    if seq_len
                    else _core.zeros((0, n, self.hidden_size), dtype=input.dtype, device=input.device)
                )
                h_n.append(h)
                if c is not None:
                    c_n.append(c)
            layer_out = outs[0] if dirs == 1 else _core.cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_out = F.dropout(layer_out, self.dropout, True)
            layer_in = layer_out

        output = layer_in
        hn = _core.stack(h_n)
        cn = _core.stack(c_n) if is_lstm else None
        if packed is not None:
            data = _core.cat([output[t].narrow(0, 0, bs) for t, bs in enumerate(sizes)], 0)
            out_packed = packed._replace(data=data)
            if packed.unsorted_indices is not None:
                idx = packed.unsorted_indices.to(hn.device)
                hn = hn.index_select(1, idx)
                cn = cn.index_select(1, idx) if cn is not None else None
            return out_packed, ((hn, cn) if is_lstm else hn)
        if not batched:
            output = output.squeeze(1)
            hn = hn.squeeze(1)
            cn = cn.squeeze(1) if cn is not None else None
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, ((hn, cn) if is_lstm else hn)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Multi-layer Elman RNN (``nonlinearity`` 'tanh' or 'relu').

    ``forward(input, h_0=None)`` with ``input`` ``(L, N, input_size)``
    (``(N, L, input_size)`` if ``batch_first``, or unbatched ``(L,
    input_size)``) returns ``(output, h_n)``: ``output`` holds the last
    layer's hidden state at every step (``(L, N, D*hidden_size)``), ``h_n``
    the final hidden state of every layer and direction
    (``(D*num_layers, N, hidden_size)``). A ``PackedSequence`` input
    (``nn.utils.rnn``) gives a ``PackedSequence`` output and each sequence's
    own final state in ``h_n``.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r} (use 'tanh' or 'relu')")
        self.nonlinearity = nonlinearity
        mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(
            mode, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype=dtype
        )

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None) -> tuple[Any, Tensor]:
        """Run the sequence; returns ``(output, h_n)``."""
        return self._run(input, hx)


_AUTOCAST_ELIGIBLE = (_core.float32, _core.float16, _core.bfloat16)


class LSTM(RNNBase):
    """Multi-layer LSTM; ``forward(input, (h_0, c_0)=None)`` returns ``(output, (h_n, c_n))``.

    Shapes as :class:`RNN`; ``proj_size`` is not supported.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        dtype: Any = None,
    ) -> None:
        if proj_size:
            raise NotImplementedError("LSTM: proj_size is not supported")
        super().__init__(
            "LSTM",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            dtype=dtype,
        )

    def forward(
        self, input: Tensor | PackedSequence, hx: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Any, tuple[Tensor, Tensor]]:
        """Run the sequence; returns ``(output, (h_n, c_n))``.

        In an autocast region the input and state are cast to the region's dtype (PyTorch's
        CPU LSTM is a lower-precision op), so the output has that dtype.
        """
        if isinstance(input, Tensor) and input.dtype in _AUTOCAST_ELIGIBLE:
            low = _core._get_autocast(input.device.type == "gpu")
            if low is not None:
                input = input.to(low)
                if hx is not None:
                    hx = (
                        hx[0].to(low) if hx[0].dtype in _AUTOCAST_ELIGIBLE else hx[0],
                        hx[1].to(low) if hx[1].dtype in _AUTOCAST_ELIGIBLE else hx[1],
                    )
        return self._run(input, hx)


class GRU(RNNBase):
    """Multi-layer GRU; ``forward(input, h_0=None)`` returns ``(output, h_n)`` (shapes as :class:`RNN`)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype: Any = None,
    ) -> None:
        super().__init__(
            "GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype=dtype
        )

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None) -> tuple[Any, Tensor]:
        """Run the sequence; returns ``(output, h_n)``."""
        return self._run(input, hx)
