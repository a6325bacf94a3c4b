"""A table of model code written the way PyTorch users write it — attention
variants, normalisation layers, recurrent step loops, the reshaping glue
between layers — run compiled and eagerly, in float32, and compared.

``import ferrograd as torch`` on purpose: every model below is what a user
would paste from PyTorch code (``nn.Module`` subclasses, ``F.`` calls,
``.transpose(1, 2).contiguous().view(B, T, C)``, ``masked_fill`` with a
``tril`` buffer, ``x[:, -1, :]``, ``out += identity``...).

Each entry runs in four modes, each traced per shape (``static``) and with a
symbolic batch dimension (``dynamic=True``), on the CPU and on the WebGPU
device (skipped, saying why, without an adapter), over batch sizes 1, 3 and
16 (then 3 again, which reuses a graph):

- ``inference``: the model in ``eval()``, under ``no_grad()``, compiled as a
  module (or the entry's prediction function);
- ``gradients``: the model in ``train()`` (dropout drawing, batch norm on
  batch statistics), ``zero_grad``, the loss and ``loss.backward()`` inside
  the compiled function; the loss, every parameter's ``.grad`` and the
  module buffers match eager;
- ``module backward``: ``torch.compile(model)`` called with gradients on,
  the loss and ``backward()`` outside it, compared the same way;
- ``training``: three optimizer steps (batches 3, 16, 3) compiled and eager
  from the same initial weights (a deep copy): the losses, then the
  parameters and buffers after every step.

Random draws (dropout, ``randn_like``) agree because both runs start from
the same seed: a compiled graph draws what eager code draws.
Floats must agree within rtol 1e-5, atol 1e-6; integer results exactly.
A second part exports the GPT models with ``fg.onnx.export`` and runs them
in onnxruntime.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ferrograd as torch
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest

RTOL, ATOL = 1e-5, 1e-6
#: Batch sizes of the calls of one compiled function, in order: the last
#: call reuses the graph traced for the second.
BATCHES = (1, 3, 16, 3)
#: Batch sizes of the three training steps.
TRAIN_BATCHES = (3, 16, 3)

Tensor = torch.Tensor


# ---------------------------------------------------------------------------
# The models
# ---------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention: one projection split into q, k, v, heads made
    with ``view`` + ``transpose``, a causal ``tril`` buffer or
    ``F.scaled_dot_product_attention(is_causal=True)``."""

    def __init__(self, n_embd: int, n_head: int, block_size: int, flash: bool) -> None:
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)
        self.n_head = n_head
        self.n_embd = n_embd
        self.dropout = 0.1
        self.flash = flash
        if not flash:
            mask = torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
            self.register_buffer("bias", mask)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            p = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=p, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """The transformer's feed-forward: 4x wide, GELU, dropout."""

    def __init__(self, n_embd: int) -> None:
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """A pre-LayerNorm transformer block."""

    def __init__(self, n_embd: int, n_head: int, block_size: int, flash: bool) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, flash)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    """nanoGPT at toy size: token and position embeddings, blocks, a final
    LayerNorm and a head tied to the token embedding."""

    def __init__(self, vocab: int = 24, block_size: int = 8, n_layer: int = 2, n_head: int = 2,
                 n_embd: int = 16, flash: bool = False) -> None:
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            drop=nn.Dropout(0.1),
            h=nn.ModuleList([Block(n_embd, n_head, block_size, flash) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx: Tensor) -> Tensor:
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        return self.lm_head(x)


def next_token(model: GPT, idx: Tensor) -> tuple[Tensor, Tensor]:
    """One greedy generation step as sampling loops write it: the last
    position's logits, a temperature, the probabilities, the pick appended."""
    logits = model(idx)
    logits = logits[:, -1, :] / 0.8
    probs = F.softmax(logits, dim=-1)
    idx_next = torch.argmax(probs, dim=-1, keepdim=True)
    return probs, torch.cat((idx, idx_next), dim=1)


def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class RMSNorm(nn.Module):
    """LLaMA's RMSNorm written out: ``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


class LlamaBlock(nn.Module):
    """A LLaMA-style block: RMSNorm, rotary embeddings from cos/sin buffers,
    grouped-query attention in ``einsum`` with the key/value heads repeated by
    ``expand`` + ``reshape`` and an additive ``triu`` mask, a SwiGLU MLP."""

    def __init__(self, dim: int = 16, n_heads: int = 4, n_kv_heads: int = 2, max_len: int = 8) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.w1 = nn.Linear(dim, 2 * dim, bias=False)
        self.w3 = nn.Linear(dim, 2 * dim, bias=False)
        self.w2 = nn.Linear(2 * dim, dim, bias=False)
        self.attention_norm = RMSNorm(dim)
        self.ffn_norm = RMSNorm(dim)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        freqs = torch.outer(torch.arange(max_len).float(), inv_freq)
        emb = torch.stack((freqs, freqs), dim=-1).flatten(-2)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        self.register_buffer("mask", torch.triu(torch.full((max_len, max_len), float("-inf")), diagonal=1))

    def attention(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim)
        cos, sin = self.cos[:T, None, :], self.sin[:T, None, :]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.n_heads // self.n_kv_heads
        k = k[:, :, :, None, :].expand(B, T, self.n_kv_heads, rep, self.head_dim).reshape(B, T, self.n_heads, -1)
        v = v[:, :, :, None, :].expand(B, T, self.n_kv_heads, rep, self.head_dim).reshape(B, T, self.n_heads, -1)
        scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(self.head_dim)
        scores = scores + self.mask[:T, :T]
        att = F.softmax(scores.float(), dim=-1).type_as(q)
        out = torch.einsum("bhts,bshd->bthd", att, v)
        return self.wo(out.reshape(B, T, -1))

    def forward(self, x: Tensor) -> Tensor:
        h = x + self.attention(self.attention_norm(x))
        return h + self.w2(F.silu(self.w1(self.ffn_norm(h))) * self.w3(self.ffn_norm(h)))


class TinyLlama(nn.Module):
    def __init__(self, vocab: int = 24, dim: int = 16) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([LlamaBlock(dim) for _ in range(2)])
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: Tensor) -> Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h)).float()


class PaddedEncoder(nn.Module):
    """A post-LN encoder layer over padded token sequences (``nn.MultiheadAttention``
    with a key padding mask), masked mean pooling and a classifier."""

    def __init__(self, vocab: int = 20, d: int = 16, heads: int = 4, classes: int = 3) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.1, batch_first=True)
        self.norm1 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Dropout(0.1), nn.Linear(2 * d, d))
        self.norm2 = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens: Tensor) -> Tensor:
        pad = tokens == 0
        x = self.emb(tokens)
        a, _ = self.attn(x, x, x, key_padding_mask=pad, need_weights=False)
        x = self.norm1(x + a)
        x = self.norm2(x + self.ff(x))
        keep = (~pad).unsqueeze(-1).float()
        pooled = (x * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
        return self.head(pooled)


def mlp_ln_gelu() -> nn.Module:
    return nn.Sequential(
        nn.Linear(12, 32), nn.LayerNorm(32), nn.GELU(), nn.Dropout(0.2),
        nn.Linear(32, 32), nn.LayerNorm(32), nn.GELU(approximate="tanh"), nn.Dropout(0.2),
        nn.Linear(32, 4),
    )


class SmallCNN(nn.Module):
    """Conv, BatchNorm2d, ReLU(inplace), pooling, then ``torch.flatten(x, 1)`` into a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.AvgPool2d(2),
        )
        self.classifier = nn.Sequential(nn.Dropout(0.25), nn.Linear(8 * 2 * 2, 10))

    def forward(self, x: Tensor) -> Tensor:
        x = self.features(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


class GroupNorm(nn.Module):
    """Group normalisation the way it is written by hand: ``view(N, G, -1)``,
    statistics over the last dim, ``view`` back, a per-channel affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))

    def forward(self, x: Tensor) -> Tensor:
        N, C, H, W = x.shape
        x = x.view(N, self.num_groups, -1)
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        x = (x - mean) / (var + self.eps).sqrt()
        x = x.view(N, C, H, W)
        return x * self.weight.view(1, C, 1, 1) + self.bias.view(1, C, 1, 1)


class GroupNormNet(nn.Module):
    """Conv, GroupNorm, SiLU twice, a global mean over the spatial dims, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(2, 8, 3, padding=1)
        self.gn1 = GroupNorm(4, 8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.gn2 = GroupNorm(2, 8)
        self.fc = nn.Linear(8, 3)

    def forward(self, x: Tensor) -> Tensor:
        x = F.silu(self.gn1(self.conv1(x)))
        x = F.silu(self.gn2(self.conv2(x)))
        return self.fc(x.mean(dim=(2, 3)))


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block, with its in-place ``out += identity``."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class TinyResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(inplace=True))
        self.layer1 = BasicBlock(4, 4)
        self.layer2 = BasicBlock(4, 8, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8, 5)

    def forward(self, x: Tensor) -> Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        x = self.avgpool(x)
        x = x.view(x.size(0), -1)
        return self.fc(x)


class LSTMTagger(nn.Module):
    """An ``nn.LSTMCell`` stepped over ``x[:, t, :]`` from zero states, the
    hidden states stacked, a head on every step and on the last one."""

    def __init__(self, inp: int = 5, hid: int = 8, classes: int = 3) -> None:
        super().__init__()
        self.hid = hid
        self.cell = nn.LSTMCell(inp, hid)
        self.tag = nn.Linear(hid, classes)

    def forward(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        h = torch.zeros(B, self.hid, dtype=x.dtype, device=x.device)
        c = torch.zeros(B, self.hid, dtype=x.dtype, device=x.device)
        outs = []
        for t in range(T):
            h, c = self.cell(x[:, t, :], (h, c))
            outs.append(h)
        hs = torch.stack(outs, dim=1)
        return self.tag(hs) + self.tag(hs[:, -1, :]).unsqueeze(1)


def tagger_loss(logits: Tensor, tags: Tensor) -> Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tags.reshape(-1))


class GRUStep(nn.Module):
    """A GRU cell written out: two projections, ``chunk(3, 1)``, the gates."""

    def __init__(self, inp: int, hid: int) -> None:
        super().__init__()
        self.x2h = nn.Linear(inp, 3 * hid)
        self.h2h = nn.Linear(hid, 3 * hid)

    def forward(self, x: Tensor, h: Tensor) -> Tensor:
        xr, xz, xn = self.x2h(x).chunk(3, 1)
        hr, hz, hn = self.h2h(h).chunk(3, 1)
        r = torch.sigmoid(xr + hr)
        z = torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1 - z) * n + z * h


class GRUSeq2Seq(nn.Module):
    """An ``nn.GRU`` encoder; a hand-written GRU decoder fed its own outputs for a few steps."""

    def __init__(self, inp: int = 4, hid: int = 8, steps: int = 3) -> None:
        super().__init__()
        self.steps = steps
        self.encoder = nn.GRU(inp, hid, batch_first=True)
        self.decoder = GRUStep(inp, hid)
        self.out = nn.Linear(hid, inp)

    def forward(self, src: Tensor) -> Tensor:
        _, h = self.encoder(src)
        h = h[-1]
        y = src[:, -1, :]
        ys = []
        for _ in range(self.steps):
            h = self.decoder(y, h)
            y = self.out(h)
            ys.append(y)
        return torch.stack(ys, dim=1)


class PositionalEncoding(nn.Module):
    """The PyTorch tutorial's sinusoidal encoding (batch first), a buffer built with strided writes."""

    def __init__(self, d_model: int, max_len: int = 16, dropout: float = 0.1) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.pe[:, : x.size(1)]
        return self.dropout(x)


class EmbedClassifier(nn.Module):
    """Token embedding scaled by sqrt(d), positional encoding, LayerNorm, mean pooling."""

    def __init__(self, vocab: int = 30, d: int = 16, classes: int = 4) -> None:
        super().__init__()
        self.d = d
        self.embed = nn.Embedding(vocab, d)
        self.pos = PositionalEncoding(d)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens) * math.sqrt(self.d)
        x = self.norm(self.pos(x))
        return self.head(x.mean(dim=1))


def channel_shuffle(x: Tensor, groups: int) -> Tensor:
    """ShuffleNet's channel shuffle."""
    batchsize, num_channels, height, width = x.size()
    channels_per_group = num_channels // groups
    x = x.view(batchsize, groups, channels_per_group, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    x = x.view(batchsize, -1, height, width)
    return x


def pixel_shuffle(x: Tensor, r: int) -> Tensor:
    """Sub-pixel upsampling written with ``reshape`` and ``permute``."""
    B, C, H, W = x.shape
    x = x.reshape(B, C // (r * r), r, r, H, W).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(B, C // (r * r), H * r, W * r)


class ShuffleUpsampler(nn.Module):
    """A ShuffleNetV2-style unit (``chunk``, a grouped conv branch, ``torch.cat``,
    channel shuffle), then pixel-shuffle upsampling by 2."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(2, 8, 3, padding=1)
        self.branch = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, groups=2), nn.BatchNorm2d(4), nn.ReLU())
        self.expand = nn.Conv2d(8, 8, 1)
        self.out = nn.Conv2d(2, 1, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(self.stem(x))
        x1, x2 = x.chunk(2, dim=1)
        x = torch.cat((x1, self.branch(x2)), 1)
        x = channel_shuffle(x, 2)
        x = pixel_shuffle(self.expand(x), 2)
        return self.out(x)


class CausalConvNet(nn.Module):
    """WaveNet-style stack: left padding with ``F.pad`` for causal dilated
    ``nn.Conv1d``s, gated ``tanh * sigmoid`` units split with ``chunk``,
    residual and skip sums, the time axis moved with ``transpose(1, 2)``."""

    def __init__(self, channels: int = 8, layers: int = 3) -> None:
        super().__init__()
        self.inp = nn.Conv1d(3, channels, 1)
        self.dilated = nn.ModuleList([nn.Conv1d(channels, 2 * channels, 2, dilation=2**i) for i in range(layers)])
        self.res = nn.ModuleList([nn.Conv1d(channels, channels, 1) for _ in range(layers)])
        self.out = nn.Linear(channels, 2)

    def forward(self, x: Tensor) -> Tensor:
        x = self.inp(x.transpose(1, 2))
        skip = 0
        for i, (conv, res) in enumerate(zip(self.dilated, self.res, strict=True)):
            a, b = conv(F.pad(x, (2**i, 0))).chunk(2, dim=1)
            h = torch.tanh(a) * torch.sigmoid(b)
            skip = skip + h
            x = x + res(h)
        return self.out(F.relu(skip).transpose(1, 2))


class ActorCritic(nn.Module):
    """A policy and a value head on a shared trunk."""

    def __init__(self, obs: int = 6, actions: int = 4) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(obs, 32), nn.Tanh())
        self.pi = nn.Linear(32, actions)
        self.v = nn.Linear(32, 1)

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        h = self.trunk(obs)
        return F.log_softmax(self.pi(h), dim=-1), self.v(h).squeeze(-1)


def a2c_loss(out: tuple[Tensor, Tensor], target: Tensor) -> Tensor:
    """Policy gradient with normalised advantages, a value loss and an entropy bonus;
    ``target`` holds the action taken and the return of each step."""
    logp, value = out
    actions, returns = target[:, 0].long(), target[:, 1]
    adv = returns - value.detach()
    adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
    taken = logp.gather(1, actions.unsqueeze(1)).squeeze(1)
    entropy = -(logp.exp() * logp).sum(-1).mean()
    return -(taken * adv).mean() + 0.5 * F.mse_loss(value, returns) - 0.01 * entropy


class VAE(nn.Module):
    """A small variational autoencoder on 8x8 images: ``nn.Flatten``, ``chunk`` into
    mean and log-variance, the reparameterisation with ``randn_like`` (the mean in
    eval), ``nn.Unflatten`` back to images."""

    def __init__(self, latent: int = 4) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2 * latent))
        self.decoder = nn.Sequential(
            nn.Linear(latent, 32), nn.ReLU(), nn.Linear(32, 64), nn.Sigmoid(), nn.Unflatten(1, (1, 8, 8))
        )

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        mu, logvar = self.encoder(x).chunk(2, dim=1)
        if self.training:
            std = torch.exp(0.5 * logvar)
            z = mu + torch.randn_like(std) * std
        else:
            z = mu
        return self.decoder(z), mu, logvar


def vae_loss(out: tuple[Tensor, Tensor, Tensor], x: Tensor) -> Tensor:
    recon, mu, logvar = out
    bce = F.binary_cross_entropy(recon, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (bce + kld) / x.size(0)


class Classifier(nn.Module):
    """Polynomial features with ``torch.cat``, a tanh MLP, class logits."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 5)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.body(torch.cat([x, x.pow(2)], dim=1)))


def predict(model: Classifier, x: Tensor) -> tuple[Tensor, ...]:
    """The softmax head at prediction time: probabilities, the top class and its confidence."""
    logits = model(x)
    probs = F.softmax(logits, dim=1)
    conf, pred = probs.max(dim=1)
    return probs, pred, conf, F.log_softmax(logits, dim=1)


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------


def _gen(batch: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(1000 * batch + salt)


def _randn(g: torch.Generator, *shape: int) -> Tensor:
    return torch.randn(*shape, generator=g)


def _labels(g: torch.Generator, n: int, *shape: int) -> Tensor:
    return torch.randint(0, n, shape, generator=g)


def _tokens(b: int) -> tuple[tuple[Tensor, ...], Tensor]:
    g = _gen(b, 1)
    idx = _labels(g, 24, b, 8)
    return (idx,), torch.cat([idx[:, 1:], _labels(g, 24, b, 1)], dim=1)


def _padded(b: int) -> tuple[tuple[Tensor, ...], Tensor]:
    g = _gen(b, 2)
    tokens = torch.randint(1, 20, (b, 7), generator=g)
    lengths = torch.randint(1, 8, (b, 1), generator=g)
    tokens = tokens.masked_fill(torch.arange(7).unsqueeze(0) >= lengths, 0)
    return (tokens,), _labels(g, 3, b)


def _images(channels: int, size: int, classes: int, salt: int) -> Callable[[int], tuple[tuple[Tensor, ...], Tensor]]:
    def make(b: int) -> tuple[tuple[Tensor, ...], Tensor]:
        g = _gen(b, salt)
        return (_randn(g, b, channels, size, size),), _labels(g, classes, b)

    return make


def _regression(in_shape: tuple[int, ...], out_shape: tuple[int, ...], salt: int):
    def make(b: int) -> tuple[tuple[Tensor, ...], Tensor]:
        g = _gen(b, salt)
        return (_randn(g, b, *in_shape),), _randn(g, b, *out_shape)

    return make


def _token_classes(b: int) -> tuple[tuple[Tensor, ...], Tensor]:
    g = _gen(b, 10)
    return (_labels(g, 30, b, 9),), _labels(g, 4, b)


def _sequences(b: int) -> tuple[tuple[Tensor, ...], Tensor]:
    g = _gen(b, 5)
    return (_randn(g, b, 6, 5),), _labels(g, 3, b, 6)


def _pictures(b: int) -> tuple[tuple[Tensor, ...], Tensor]:
    g = _gen(b, 6)
    x = torch.rand(b, 1, 8, 8, generator=g)
    return (x,), x


def _features(b: int) -> tuple[tuple[Tensor, ...], Tensor]:
    g = _gen(b, 13)
    return (_randn(g, b, 10),), _labels(g, 5, b)


def _series(b: int) -> tuple[tuple[Tensor, ...], Tensor]:
    g = _gen(b, 15)
    return (_randn(g, b, 10, 3),), _randn(g, b, 10, 2)


def _rollout(b: int) -> tuple[tuple[Tensor, ...], Tensor]:
    g = _gen(b, 16)
    obs = _randn(g, b, 6)
    return (obs,), torch.stack([_labels(g, 4, b).float(), _randn(g, b)], dim=1)


def _sgd(params: Any) -> Any:
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


def _adam(params: Any) -> Any:
    return torch.optim.Adam(params, lr=1e-3)


def _rmsprop(params: Any) -> Any:
    return torch.optim.RMSprop(params, lr=1e-3)


def _adamw(params: Any) -> Any:
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1)


@dataclass(frozen=True)
class Entry:
    """One model of the table.

    ``build`` makes the model (seeded); ``data(batch)`` the forward
    arguments and the target; ``loss(output, target)`` the training loss;
    ``predict(model, *args)``, when given, is what inference compiles
    instead of the module; ``optim`` the optimizer of the training steps.
    """

    id: str
    build: Callable[[], nn.Module]
    data: Callable[[int], tuple[tuple[Tensor, ...], Tensor]]
    loss: Callable[[Any, Tensor], Tensor]
    predict: Callable[..., Any] | None = None
    optim: Callable[[Any], Any] = _sgd


def _seeded(make: Callable[[], nn.Module], warm: Callable[[int], Any] | None = None) -> Callable[[], nn.Module]:
    """``make`` under a fixed seed; with ``warm``, a few train-mode forward
    passes give batch-norm layers running statistics off their defaults."""

    def build() -> nn.Module:
        torch.manual_seed(7)
        m = make()
        if warm is not None:
            with torch.no_grad():
                for b in (4, 5):
                    m(*warm(b)[0])
        return m

    return build


TABLE = [
    Entry("gpt_manual_attention", _seeded(lambda: GPT(flash=False)), _tokens, lm_loss, optim=_adamw),
    Entry("gpt_sdpa", _seeded(lambda: GPT(flash=True)), _tokens, lm_loss, predict=next_token, optim=_adamw),
    Entry("llama_rope_gqa_einsum", _seeded(TinyLlama), _tokens, lm_loss, optim=_adamw),
    Entry("mha_padding_mask", _seeded(PaddedEncoder), _padded, F.cross_entropy, optim=_adam),
    Entry("mlp_layernorm_gelu_dropout", _seeded(mlp_ln_gelu), _regression((12,), (4,), 3), F.mse_loss,
          optim=_adam),
    Entry("cnn_batchnorm_pool_flatten", _seeded(SmallCNN, _images(1, 8, 10, 4)), _images(1, 8, 10, 4),
          F.cross_entropy),
    Entry("groupnorm", _seeded(GroupNormNet), _images(2, 6, 3, 7), F.cross_entropy),
    Entry("resnet_basic_block", _seeded(TinyResNet, _images(1, 8, 5, 8)), _images(1, 8, 5, 8), F.cross_entropy),
    Entry("lstm_cell_loop", _seeded(LSTMTagger), _sequences, tagger_loss),
    Entry("gru_seq2seq", _seeded(GRUSeq2Seq), _regression((5, 4), (3, 4), 9), F.mse_loss),
    Entry("embedding_positional", _seeded(EmbedClassifier), _token_classes, F.cross_entropy, optim=_adam),
    Entry("channel_pixel_shuffle", _seeded(ShuffleUpsampler, _regression((2, 4, 4), (1, 8, 8), 12)),
          _regression((2, 4, 4), (1, 8, 8), 12), F.mse_loss),
    Entry("causal_conv1d_gated", _seeded(CausalConvNet), _series, F.mse_loss, optim=_adam),
    Entry("actor_critic_gather", _seeded(ActorCritic), _rollout, a2c_loss, optim=_rmsprop),
    Entry("vae", _seeded(VAE), _pictures, vae_loss, optim=_adam),
    Entry("softmax_classifier", _seeded(Classifier), _features,
          lambda logits, y: F.cross_entropy(logits, y, label_smoothing=0.1), predict=predict),
]

ENTRIES = [pytest.param(e, id=e.id) for e in TABLE]
_NO_GPU = pytest.mark.skipif(
    not torch.gpu.is_available(), reason=f"no WebGPU adapter: {torch.gpu.unavailable_reason()}"
)
DEVICE = pytest.mark.parametrize(
    "device,dynamic",
    [
        ("cpu", False),
        ("cpu", True),
        pytest.param("gpu", False, marks=_NO_GPU),
        pytest.param("gpu", True, marks=_NO_GPU),
    ],
    ids=["static", "dynamic", "gpu-static", "gpu-dynamic"],
)


def _on(device: str, batch: tuple[tuple[Tensor, ...], Tensor]) -> tuple[tuple[Tensor, ...], Tensor]:
    args, target = batch
    return tuple(a.to(device) for a in args), target.to(device)


# ---------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------


def _leaves(out: Any) -> list[Tensor]:
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _leaves(o)]
    assert out is None, f"unexpected result {type(out).__name__}"
    return []


def _close(got: Any, want: Any, what: str) -> None:
    """Same structure, shapes and dtypes; floats within RTOL/ATOL, the rest exactly."""
    gs, ws = _leaves(got), _leaves(want)
    assert len(gs) == len(ws), what
    for k, (g, w) in enumerate(zip(gs, ws, strict=True)):
        where = f"{what} [{k}]"
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), (
            f"{where}: {g.dtype}{tuple(g.shape)} != {w.dtype}{tuple(w.shape)}")
        gn, wn = g.detach().cpu().numpy(), w.detach().cpu().numpy()
        if w.dtype.is_floating_point:
            np.testing.assert_allclose(gn, wn, rtol=RTOL, atol=ATOL, err_msg=where)
        else:
            np.testing.assert_array_equal(gn, wn, err_msg=where)


def _same_params(cm: nn.Module, em: nn.Module, what: str, grads: bool = False) -> None:
    for (name, pe), pc in zip(em.named_parameters(), cm.parameters(), strict=True):
        if grads:
            assert (pc.grad is None) == (pe.grad is None), f"{what}: {name}.grad"
            if pe.grad is not None:
                _close(pc.grad, pe.grad, f"{what}: {name}.grad")
        else:
            _close(pc, pe, f"{what}: {name}")
    for (name, be), bc in zip(em.named_buffers(), cm.buffers(), strict=True):
        _close(bc, be, f"{what}: buffer {name}")


def _check_traces(cf: Any, dynamic: bool, batches: tuple[int, ...]) -> None:
    assert cf.stats.graph_breaks == 0
    assert cf.stats.traces == (1 if dynamic else len(set(batches))), cf.stats


# ---------------------------------------------------------------------------
# The three modes
# ---------------------------------------------------------------------------


@DEVICE
@pytest.mark.parametrize("entry", ENTRIES)
def test_inference_matches_eager(entry: Entry, device: str, dynamic: bool) -> None:
    """(a) eval() and no_grad(): the compiled module (or prediction function) against eager."""
    model = entry.build().eval().to(device)
    if entry.predict is None:
        eager: Callable[..., Any] = model
    else:
        def eager(*args: Tensor) -> Any:
            return entry.predict(model, *args)
    cf = torch.compile(eager, dynamic=dynamic)
    with torch.no_grad():
        for b in BATCHES:
            args, _ = _on(device, entry.data(b))
            _close(cf(*args), eager(*args), f"batch {b}")
    _check_traces(cf, dynamic, BATCHES)


@DEVICE
@pytest.mark.parametrize("entry", ENTRIES)
def test_gradients_match_eager(entry: Entry, device: str, dynamic: bool) -> None:
    """(b) train(), gradients on: zero_grad, loss and backward inside the
    compiled function; the loss, every .grad and the buffers against eager."""
    em = entry.build().train().to(device)
    cm = copy.deepcopy(em)

    def step_of(model: nn.Module) -> Callable[..., Tensor]:
        def step(*args: Tensor) -> Tensor:
            model.zero_grad()
            loss = entry.loss(model(*args[:-1]), args[-1])
            loss.backward()
            return loss

        return step

    estep = step_of(em)
    cstep = torch.compile(step_of(cm), dynamic=dynamic)
    for k, b in enumerate(BATCHES):
        args, target = _on(device, entry.data(b))
        torch.manual_seed(100 + k)
        want = estep(*args, target)
        torch.manual_seed(100 + k)
        got = cstep(*args, target)
        _close(got, want, f"call {k} (batch {b}): loss")
        _same_params(cm, em, f"call {k} (batch {b})", grads=True)
    _check_traces(cstep, dynamic, BATCHES)


@DEVICE
@pytest.mark.parametrize("entry", ENTRIES)
def test_compiled_module_backward_outside_matches_eager(entry: Entry, device: str, dynamic: bool) -> None:
    """(b) the other way users compile: ``torch.compile(model)`` called with
    gradients on, the loss and ``backward()`` in eager code around it."""
    em = entry.build().train().to(device)
    cm = copy.deepcopy(em)
    cf = torch.compile(cm, dynamic=dynamic)
    for k, b in enumerate(BATCHES):
        args, target = _on(device, entry.data(b))
        for model in (em, cm):
            model.zero_grad()
        torch.manual_seed(300 + k)
        want = entry.loss(em(*args), target)
        want.backward()
        torch.manual_seed(300 + k)
        got = entry.loss(cf(*args), target)
        got.backward()
        _close(got, want, f"call {k} (batch {b}): loss")
        _same_params(cm, em, f"call {k} (batch {b})", grads=True)
    _check_traces(cf, dynamic, BATCHES)


@DEVICE
@pytest.mark.parametrize("entry", ENTRIES)
def test_training_steps_match_eager(entry: Entry, device: str, dynamic: bool) -> None:
    """(c) full training steps (forward, backward, optimizer step) compiled and
    eager from the same weights: the losses, then parameters and buffers after each step."""
    em = entry.build().train().to(device)
    cm = copy.deepcopy(em)

    def step_of(model: nn.Module) -> Callable[..., Tensor]:
        opt = entry.optim(model.parameters())

        def step(*args: Tensor) -> Tensor:
            opt.zero_grad()
            loss = entry.loss(model(*args[:-1]), args[-1])
            loss.backward()
            opt.step()
            return loss

        return step

    estep = step_of(em)
    cstep = torch.compile(step_of(cm), dynamic=dynamic)
    for k, b in enumerate(TRAIN_BATCHES):
        args, target = _on(device, entry.data(b))
        torch.manual_seed(200 + k)
        want = estep(*args, target)
        torch.manual_seed(200 + k)
        got = cstep(*args, target)
        _close(got, want, f"step {k} (batch {b}): loss")
        _same_params(cm, em, f"after step {k} (batch {b})")
    _check_traces(cstep, dynamic, TRAIN_BATCHES)


# ---------------------------------------------------------------------------
# Model code whose Python needs tensor values: refused at capture
# ---------------------------------------------------------------------------


def loss_over_real_tokens(logits: Tensor, targets: Tensor) -> Tensor:
    """Padding dropped by a boolean mask (``ignore_index`` keeps shapes fixed)."""
    keep = targets != -100
    return F.cross_entropy(logits[keep], targets[keep])


def truncate_to_longest(x: Tensor, lengths: Tensor) -> Tensor:
    """A padded batch cut to its longest sequence, a size read from a tensor."""
    T = int(lengths.max())
    return x[:, :T].mean(dim=1)


def skip_bad_batches(x: Tensor) -> Tensor:
    """A Python branch on a value (``fg.cond`` captures both sides)."""
    loss = (x * x).mean()
    if torch.isnan(loss):
        return torch.zeros(())
    return loss


def _refused_inputs(name: str) -> tuple[Tensor, ...]:
    g = _gen(3, 20)
    x = _randn(g, 3, 5, 7)
    if name == "loss_over_real_tokens":
        return x, _labels(g, 7, 3, 5).masked_fill(torch.arange(5) >= 3, -100)
    if name == "truncate_to_longest":
        return x, torch.tensor([2, 4, 3])
    return (x,)


REFUSED = {
    "loss_over_real_tokens": (loss_over_real_tokens, r"boolean mask index.*not known while a graph is being captured"),
    "truncate_to_longest": (truncate_to_longest, r"value of a tensor being captured.*not known until the graph runs"),
    "skip_bad_batches": (skip_bad_batches, r"value of a tensor being captured.*fg\.cond"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_value_dependent_model_code_is_refused_at_capture(name: str) -> None:
    """Data-dependent shapes and Python that reads a tensor's value cannot be
    captured: ``TraceError`` names the reason and the user's line; with
    ``fallback="eager"`` such a function runs eagerly instead."""
    fn, why = REFUSED[name]
    args = _refused_inputs(name)
    with pytest.raises(torch.TraceError, match=why) as info:
        torch.compile(fn)(*args)
    assert "test_model_table.py" in str(info.value) and fn.__name__ in str(info.value)
    cf = torch.compile(fn, fallback="eager")
    _close(cf(*args), fn(*args), name)
    assert cf.stats.graph_breaks == 1


# ---------------------------------------------------------------------------
# ONNX: the GPT models exported and run in onnxruntime
# ---------------------------------------------------------------------------

#: onnxruntime computes in its own kernels (its own matmul blocking, its own
#: erf and exp): measured against eager, the logits differ by at most 6e-7
#: absolute (relative up to 1.3e-4 on logits near zero).
ORT_TOL = {"rtol": 1e-4, "atol": 1e-5}


def _onnxruntime() -> Any:
    pytest.importorskip("onnx", reason="the onnx package is not installed (pip install 'ferrograd[onnx]')")
    return pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'ferrograd[onnx]')")


@pytest.mark.parametrize("export", ["batch1", "batch4", "dynamic"])
@pytest.mark.parametrize("flash", [False, True], ids=["manual_attention", "sdpa"])
def test_gpt_exports_to_onnx_and_matches_eager(flash: bool, export: str) -> None:
    """``fg.onnx.export`` of the GPT (logits) and of a greedy generation step
    (last position, softmax, argmax, ``torch.cat``), run in onnxruntime."""
    ort = _onnxruntime()
    model = _seeded(lambda: GPT(flash=flash))().eval()
    dynamic = export == "dynamic"
    example = _tokens(1 if export == "batch1" else 4)[0]
    runs = (1, 4, 16) if dynamic else (example[0].shape[0],)
    for fn, what in ((model, "logits"), (lambda idx: next_token(model, idx), "next token")):
        onnx_model = torch.onnx.export(fn, example, dynamic=dynamic)
        batch_dim = onnx_model.graph.input[0].type.tensor_type.shape.dim[0]
        assert batch_dim.dim_param if dynamic else batch_dim.dim_value == example[0].shape[0]
        sess = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
        for b in runs:
            (idx,), _ = _tokens(b)
            with torch.no_grad():
                want = _leaves(fn(idx))
            got = sess.run(None, {sess.get_inputs()[0].name: idx.numpy()})
            assert len(got) == len(want)
            for k, (g, w) in enumerate(zip(got, want, strict=True)):
                where = f"{what} [{k}] at batch {b}"
                assert g.shape == tuple(w.shape), where
                if w.dtype.is_floating_point:
                    np.testing.assert_allclose(g, w.numpy(), err_msg=where, **ORT_TOL)
                else:
                    np.testing.assert_array_equal(g, w.numpy(), err_msg=where)
