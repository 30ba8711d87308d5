"""The key and value arguments of a kvstore call, checked and normalized as MXNet's kvstore takes them.

MXNet's ``push(key, value)`` takes one key with one array or a list of arrays (one per device, summed),
or a list of keys with a list of the same length whose items are arrays or lists of arrays.  A key
given twice in one call has all its arrays summed (push) or written (pull), as in MXNet.  Keys are
``int`` or ``str`` (not ``bool``, ``float`` or numpy scalars, which MXNet would silently convert).
"""
import mxnet as mx
import numpy as np


def check_key(key):
    """Raises ValueError unless ``key`` is an int (not a bool) or a str."""
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise ValueError("keys must be int or str, got %r (%s)" % (key, type(key).__name__))


def _arrays(what, key, value):
    arrays = list(value) if isinstance(value, (list, tuple)) else [value]
    if not arrays:
        raise ValueError("%s: key %r has an empty list of arrays" % (what, key))
    for a in arrays:
        if not isinstance(a, mx.nd.NDArray):
            raise TypeError("%s: key %r: expected an mxnet NDArray, got %s" % (what, key, type(a).__name__))
    return arrays


def key_arrays(what, key, value, unique=False):
    """[(key, [arrays])] in the order keys first appear, each key once (its arrays merged).

    ``what`` ('push', 'pull', 'init') names the call in error messages; ``unique`` refuses a key
    given twice (init).
    """
    if isinstance(key, (list, tuple)):
        keys = list(key)
        if not isinstance(value, (list, tuple)):
            raise ValueError("%s: %d keys need a list of %d values, got %s" % (what, len(keys), len(keys),
                                                                               type(value).__name__))
        if len(value) != len(keys):
            raise ValueError("%s: %d keys and %d values" % (what, len(keys), len(value)))
        pairs = list(zip(keys, value))
    else:
        pairs = [(key, value)]
    merged = {}
    for k, v in pairs:
        check_key(k)
        if unique and k in merged:
            raise ValueError("%s: key %r is given twice" % (what, k))
        merged.setdefault(k, []).extend(_arrays(what, k, v))
    return list(merged.items())


def pull_targets(key, out):
    """``key_arrays`` for a pull, with a clear error when ``out`` is missing."""
    if out is None:
        raise ValueError("pull: out= is required (the arrays to write key %r's values into)" % (key,))
    return key_arrays("pull", key, out)


def check_dense(what, key, array):
    if array.stype != "default":
        raise TypeError("%s: key %r: mxnet_gc's stores take dense arrays, got a %s one (use .tostype('default'))"
                        % (what, key, array.stype))


def check_arrays(what, key, arrays, shape):
    """Raises unless every array of ``key`` has the key's ``shape``, is float32 and dense."""
    for a in arrays:
        check_dense(what, key, a)
        if a.shape != shape:
            raise ValueError("%s: key %r has shape %s, got an array of shape %s" % (what, key, shape, a.shape))
        if a.dtype != np.float32:
            raise TypeError("%s: key %r: arrays must be float32, got %s" % (what, key, np.dtype(a.dtype).name))


def initial_values(key, value):
    """[(key, array)] of an init call: each key once, with its first array (devices hold copies)."""
    pairs = key_arrays("init", key, value, unique=True)
    for k, arrays in pairs:
        a = arrays[0]
        check_dense("init", k, a)
        if a.size == 0:
            raise ValueError("init: key %r has an empty array (shape %s); mxnet_gc's stores need at least one "
                             "value per key" % (k, a.shape))
        if a.dtype != np.float32:
            raise TypeError("init: key %r: mxnet_gc's stores hold float32 values, got %s (cast with "
                            ".astype('float32'))" % (k, np.dtype(a.dtype).name))
    return [(k, arrays[0]) for k, arrays in pairs]
