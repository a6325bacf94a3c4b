"""Views share memory where NumPy's do: writes through a view show in the base and back.

Each case applies the same view operation to a ferrograd tensor and to the
NumPy array it wraps (``fg.from_numpy`` shares memory), then checks the
values agree, that the view shares the base's storage (and memory, seen from
NumPy), and that writes in either direction land where NumPy's would.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

# (name, ferrograd view, NumPy equivalent, base shape)
VIEW_CASES = [
    ("view", lambda t: t.view(6, 4), lambda a: a.reshape(6, 4), (2, 3, 4)),
    ("view_-1", lambda t: t.view(-1, 2), lambda a: a.reshape(-1, 2), (2, 3, 4)),
    ("view_as", lambda t: t.view_as(fg.empty(4, 6)), lambda a: a.reshape(4, 6), (2, 3, 4)),
    ("reshape_viewable", lambda t: t.reshape(3, 8), lambda a: a.reshape(3, 8), (2, 3, 4)),
    ("reshape_merge_trailing_of_slice", lambda t: t[1:].reshape(1, 12), lambda a: a[1:].reshape(1, 12),
     (2, 3, 4)),
    ("flatten", lambda t: t.flatten(), lambda a: a.reshape(-1), (2, 3, 4)),
    ("flatten_partial", lambda t: t.flatten(1), lambda a: a.reshape(2, 12), (2, 3, 4)),
    ("ravel", lambda t: t.ravel(), lambda a: a.ravel(), (2, 3, 4)),
    ("permute", lambda t: t.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), (2, 3, 4)),
    ("permute_neg", lambda t: t.permute(-1, -3, -2), lambda a: a.transpose(2, 0, 1), (2, 3, 4)),
    ("transpose", lambda t: t.transpose(0, 2), lambda a: a.swapaxes(0, 2), (2, 3, 4)),
    ("swapaxes", lambda t: t.swapaxes(-1, 0), lambda a: a.swapaxes(-1, 0), (2, 3, 4)),
    ("T", lambda t: t.T, lambda a: a.T, (2, 3, 4)),
    ("T_2d", lambda t: t.T, lambda a: a.T, (3, 4)),
    ("t", lambda t: t.t(), lambda a: a.T, (3, 4)),
    ("mT", lambda t: t.mT, lambda a: np.swapaxes(a, -1, -2), (2, 3, 4)),
    ("squeeze_all", lambda t: t.squeeze(), lambda a: a.squeeze(), (1, 3, 1, 4)),
    ("squeeze_dim", lambda t: t.squeeze(2), lambda a: a.squeeze(2), (1, 3, 1, 4)),
    ("squeeze_tuple", lambda t: t.squeeze((0, 2)), lambda a: a.squeeze((0, 2)), (1, 3, 1, 4)),
    ("squeeze_noop", lambda t: t.squeeze(1), lambda a: a, (1, 3, 1, 4)),
    ("unsqueeze", lambda t: t.unsqueeze(1), lambda a: np.expand_dims(a, 1), (3, 4)),
    ("unsqueeze_neg", lambda t: t.unsqueeze(-1), lambda a: np.expand_dims(a, -1), (3, 4)),
    ("narrow", lambda t: t.narrow(1, 1, 2), lambda a: a[:, 1:3], (3, 4)),
    ("narrow_neg_start", lambda t: t.narrow(0, -2, 2), lambda a: a[-2:], (3, 4)),
    ("select", lambda t: t.select(1, 2), lambda a: a[:, 2], (3, 4)),
    ("select_neg", lambda t: t.select(-1, -1), lambda a: a[..., -1], (2, 3, 4)),
    ("int_index", lambda t: t[1], lambda a: a[1], (3, 4)),
    ("flip", lambda t: t.flip(0), lambda a: a[::-1], (3, 4)),
    ("flip_all", lambda t: t.flip(0, 1, 2), lambda a: a[::-1, ::-1, ::-1], (2, 3, 4)),
    ("slice", lambda t: t[1:3], lambda a: a[1:3], (4, 3)),
    ("slice_step", lambda t: t[::2, 1::2], lambda a: a[::2, 1::2], (5, 6)),
    ("slice_neg_step", lambda t: t[::-1], lambda a: a[::-1], (5, 6)),
    ("slice_neg_step2", lambda t: t[:, ::-2], lambda a: a[:, ::-2], (5, 6)),
    ("slice_neg_bounds", lambda t: t[-1:0:-2, -3:], lambda a: a[-1:0:-2, -3:], (5, 6)),
    ("slice_none", lambda t: t[None], lambda a: a[None], (3, 4)),
    ("slice_none_mid", lambda t: t[:, None, 1:3], lambda a: a[:, None, 1:3], (3, 4)),
    ("ellipsis", lambda t: t[..., 1], lambda a: a[..., 1], (2, 3, 4)),
    ("ellipsis_none", lambda t: t[1, ..., None], lambda a: a[1, ..., None], (2, 3, 4)),
    ("ellipsis_only", lambda t: t[...], lambda a: a[...], (2, 3)),
    ("empty_slice", lambda t: t[2:2], lambda a: a[2:2], (4, 3)),
    ("as_strided", lambda t: t.as_strided((3, 2), (1, 3)), lambda a: np.lib.stride_tricks.as_strided(
        a, (3, 2), (a.itemsize, 3 * a.itemsize)), (6,)),
    ("chain", lambda t: t.T[1:, ::-1].unsqueeze(0).narrow(2, 0, 2),
     lambda a: a.T[1:, ::-1][None][:, :, 0:2], (3, 4)),
    ("chain_flip_transpose", lambda t: t.flip(1).transpose(0, 1)[::2],
     lambda a: a[:, ::-1].swapaxes(0, 1)[::2], (3, 4)),
]

DTYPES = ["float64", "float32", "int64", "int32", "bool", "float16"]


def _base(shape, dtype):
    n = int(np.prod(shape))
    a = (np.arange(n) % 7).reshape(shape).astype(dtype) if dtype == "bool" else (
        np.arange(n).reshape(shape).astype(dtype))
    return a


def _fresh_values(shape, dtype, salt):
    n = int(np.prod(shape))
    v = -(np.arange(n) + salt)
    return (v % 2 == 0).reshape(shape) if dtype == "bool" else v.reshape(shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_view_shares_memory(case, dtype):
    name, fg_view, np_view, shape = case
    a = _base(shape, dtype)
    t = fg.from_numpy(a)
    v = fg_view(t)
    ref = np_view(a)
    assert tuple(v.shape) == ref.shape, name
    np.testing.assert_array_equal(np.asarray(v), ref)
    assert v._shares_storage(t), f"{name} copied"
    # NumPy sees the view's memory inside the base array's
    if v.numel() > 0:
        assert np.shares_memory(np.asarray(v), a)
    # write through the view (ferrograd side): the base changes exactly where NumPy's view would
    if v.numel() > 0:
        expect = a.copy()
        new = _fresh_values(v.shape, dtype, 1)
        np_view(expect)[...] = new
        v.copy_(fg.from_numpy(new))
        np.testing.assert_array_equal(a, expect)
        # write into the base: the view sees it
        a[...] = _fresh_values(shape, dtype, 5)
        np.testing.assert_array_equal(np.asarray(v), np_view(a))
        # write through NumPy's view of the tensor view
        expect = a.copy()
        new = _fresh_values(v.shape, dtype, 11)
        np_view(expect)[...] = new
        np.asarray(v)[...] = new
        np.testing.assert_array_equal(a, expect)
        np.testing.assert_array_equal(np.asarray(t), expect)


@pytest.mark.parametrize("name,fg_view,np_view,shape", [
    ("expand", lambda t: t.expand(3, 2, 4), lambda a: np.broadcast_to(a, (3, 2, 4)), (2, 1)),
    ("expand_-1", lambda t: t.expand(2, -1, 5), lambda a: np.broadcast_to(a, (2, 2, 5)), (2, 1)),
    ("broadcast_to", lambda t: fg.broadcast_to(t, [4, 2, 3]), lambda a: np.broadcast_to(a, (4, 2, 3)), (2, 3)),
    ("expand_as", lambda t: t.expand_as(fg.empty(5, 2, 1)), lambda a: np.broadcast_to(a, (5, 2, 1)), (2, 1)),
])
def test_expanded_views_read_through(name, fg_view, np_view, shape):
    """Expanded views repeat memory (stride 0): reads follow writes to the base."""
    a = _base(shape, "float64")
    t = fg.from_numpy(a)
    v = fg_view(t)
    assert v._shares_storage(t)
    np.testing.assert_array_equal(np.asarray(v), np_view(a))
    assert 0 in v.stride()
    a += 100
    np.testing.assert_array_equal(np.asarray(v), np_view(a))
    t.add_(1)
    np.testing.assert_array_equal(np.asarray(v), np_view(a))


def test_inplace_on_expanded_view_raises():
    base = fg.tensor([1.0, 2.0])
    e = base.unsqueeze(0).expand(3, 2)
    with pytest.raises(RuntimeError):
        e.add_(1)
    np.testing.assert_array_equal(np.asarray(base), [1.0, 2.0])


def test_reshape_copies_when_it_must():
    a = _base((3, 4), "float64")
    t = fg.from_numpy(a).T  # (4, 3), not viewable as (12,)
    r = t.reshape(12)
    np.testing.assert_array_equal(np.asarray(r), a.T.reshape(12))
    assert not r._shares_storage(t)
    r.fill_(-1)
    assert (a >= 0).all()
    with pytest.raises(RuntimeError, match="view"):
        t.view(12)
    # flatten and ravel copy too (like reshape)
    assert not t.flatten()._shares_storage(t)
    assert not t.ravel()._shares_storage(t)


def test_contiguous_and_clone():
    a = _base((3, 4), "float32")
    t = fg.from_numpy(a)
    assert t.contiguous() is t or t.contiguous()._shares_storage(t)
    tt = t.T
    c = tt.contiguous()
    assert c.is_contiguous() and not c._shares_storage(t)
    np.testing.assert_array_equal(np.asarray(c), a.T)
    k = t.clone()
    assert not k._shares_storage(t)
    k.fill_(-9)
    assert (a != -9).all()


def test_view_metadata():
    a = _base((2, 3, 4), "float32")
    t = fg.from_numpy(a)
    assert t.stride() == (12, 4, 1) and t.is_contiguous() and t.storage_offset() == 0
    v = t.permute(2, 0, 1)
    assert v.stride() == (1, 12, 4) and not v.is_contiguous()
    s = t[1, 1:, ::2]
    assert s.stride() == (4, 2) and s.storage_offset() == 12 + 4
    f = t.flip(2)
    assert f.stride() == (12, 4, -1) and f.storage_offset() == 3
    # NumPy byte strides agree (negative included)
    assert np.asarray(f).strides == a[:, :, ::-1].strides


def test_views_of_noncontiguous_numpy_arrays():
    big = np.arange(60.0).reshape(5, 12)
    a = big[::2, ::-3]  # non-contiguous, negative stride
    t = fg.from_numpy(a)
    assert tuple(t.shape) == a.shape and not t.is_contiguous()
    np.testing.assert_array_equal(np.asarray(t), a)
    v = t.T[1:]
    np.testing.assert_array_equal(np.asarray(v), a.T[1:])
    v.fill_(-5)
    assert (a.T[1:] == -5).all() and (big[::2, ::-3].T[1:] == -5).all()
    # untouched elements of the big array keep their values
    assert big[1].tolist() == list(np.arange(12.0, 24.0))


def test_version_counter_is_shared():
    t = fg.zeros(4)
    v = t[1:3]
    before = t._version
    v.fill_(1)
    assert t._version == v._version > before
    t.add_(1)
    assert v._version == t._version
