"""Inside ``vmap`` an op takes its arguments as it does outside: a parameter that may be
given by position may be given by keyword (``roll(x, shift=1)``, NumPy's own names
such as ``repeat(x, repeats=2)``), and a call the op refuses outside vmap is the same
TypeError inside, naming the op. Values: a loop over the examples."""

import numpy as np
import pytest

import autodiff as ad

CALLS = {
    "roll shift=": lambda xp, v: xp.roll(v, shift=1),
    "roll shift=, axis=": lambda xp, v: xp.roll(v, shift=-1, axis=0),
    "clip min=, max=": lambda xp, v: xp.clip(v, min=1.0, max=4.0),
    "sum axis=, keepdims=": lambda xp, v: xp.sum(v, axis=0, keepdims=True),
    "full shape=, fill_value=": lambda xp, v: v + xp.full(shape=(3,), fill_value=1.0),
    "cumulative_sum axis=": lambda xp, v: xp.cumulative_sum(v, axis=0),
    "NumPy: repeat repeats=": lambda xp, v: xp.repeat(v, repeats=2),
    "NumPy: tile reps=": lambda xp, v: xp.tile(v, reps=(2,)),
    "NumPy: take indices=": lambda xp, v: xp.take(v, indices=xp.asarray([2, 0]), axis=0),
}
REFUSED = {  # positional-only in the standard, and in both backends
    "matmul x2=": lambda xp, v: xp.matmul(v, x2=v),
    "take_along_axis indices=": lambda xp, v: xp.take_along_axis(
        v, indices=xp.asarray([0]), axis=0
    ),
}


def _examples(xp):
    return xp.asarray(np.arange(6.0).reshape(2, 3) ** 1.5)


@pytest.mark.parametrize("name", CALLS)
def test_keywords_inside_vmap_as_outside(xp, name):
    call = CALLS[name]
    x = _examples(xp)
    try:
        loop = [np.asarray(call(xp, x[i, ...]).data) for i in range(2)]
    except TypeError:
        assert name.startswith("NumPy") and "strict" in xp.__name__  # strict's names only
        with pytest.raises(TypeError, match=name.split()[1]):
            ad.vmap(lambda v: call(xp, v))(x)
        return
    out = ad.vmap(lambda v: call(xp, v))(x)
    np.testing.assert_allclose(np.asarray(out.data), np.stack(loop), rtol=1e-15)


@pytest.mark.parametrize("name", REFUSED)
def test_a_call_refused_outside_vmap_is_refused_inside_naming_the_op(xp, name):
    call, op = REFUSED[name], name.split()[0]
    x = _examples(xp)
    with pytest.raises(TypeError, match=op):
        call(xp, x[0, ...])
    with pytest.raises(TypeError, match=op):
        ad.vmap(lambda v: call(xp, v))(x)
