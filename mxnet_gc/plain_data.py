"""Python values as JSON and arrays, read back without running any code (no pickle).

Optimizers, their learning-rate schedulers and their states travel to the servers and into checkpoints.
``encode`` turns them into JSON: None, bool, int, float and str as themselves, a list as a JSON list, a
tuple, a dict (any of these as keys), an array (NDArray or numpy, numeric dtypes only) or an object as a
one-entry tagged JSON object.  An object is kept as its class name and its ``__dict__``;
``decode`` rebuilds it only for a class the caller allows (MXNet's optimizers and schedulers), or
writes the saved attributes into an object the caller already has (``into``).  A reader thus never
imports or calls anything a file or a message names.
"""
import base64
import functools
import types

import mxnet as mx
import numpy as np

NUMERIC_KINDS = "biuf"  # bool, int, unsigned, float: dtypes whose bytes are only numbers
CODE = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType, functools.partial)


class NotPlainData(TypeError):
    """A value ``encode`` cannot keep as data (it would need code to rebuild)."""


def class_name(obj):
    cls = type(obj)
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def encode(value, arrays=None):
    """``value`` as JSON-serializable data.  Arrays go into ``arrays`` (a dict, under names "a<i>"), or
    inline as base64 when ``arrays`` is None."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list):
        return [encode(v, arrays) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode(v, arrays) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode(k, arrays), encode(v, arrays)] for k, v in value.items()]}
    if isinstance(value, (mx.nd.NDArray, np.ndarray)):
        kind = "ndarray" if isinstance(value, mx.nd.NDArray) else "numpy"
        data = value.asnumpy() if kind == "ndarray" else value
        if data.dtype.kind not in NUMERIC_KINDS:
            raise NotPlainData("an array of dtype %s is not plain data" % data.dtype)
        if arrays is None:
            return {kind: {"dtype": data.dtype.str, "shape": list(data.shape),
                           "bytes": base64.b64encode(np.ascontiguousarray(data).tobytes()).decode()}}
        name = "a%d" % len(arrays)
        arrays[name] = data
        return {kind: name}
    if hasattr(value, "__dict__") and not isinstance(value, CODE):
        return encode_object(value, vars(value), arrays)
    raise NotPlainData("a %s is not plain data" % class_name(value))


def encode_object(obj, attributes, arrays=None):
    """An object as ``encode`` keeps it, with ``attributes`` (a dict of names) standing for its ``__dict__``."""
    return {"object": {"class": class_name(obj), "state": encode(dict(attributes), arrays)}}


def decode(data, arrays=None, classes=(), into=None):
    """The value ``encode`` made of ``data``.  An object is rebuilt only if its class is one of
    ``classes`` (its state set as pickle would, without calling the class), or written into ``into``
    (an object of the same class, whose attributes the saved ones replace); anything else raises
    ValueError."""
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(v, arrays, classes) for v in data]
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError("not encoded plain data: %.80r" % (data,))
    (tag, body), = data.items()
    if tag == "tuple":
        return tuple(decode(v, arrays, classes) for v in body)
    if tag == "dict":
        return {_hashable(decode(k, arrays, classes)): decode(v, arrays, classes) for k, v in body}
    if tag in ("ndarray", "numpy"):
        values = _array(body, arrays)
        return mx.nd.array(values, dtype=values.dtype) if tag == "ndarray" else values
    if tag == "object":
        return _object(body, arrays, classes, into)
    raise ValueError("unknown tag %r in encoded plain data" % tag)


def _object(body, arrays, classes, into):
    name, pairs = body.get("class"), (body.get("state") or {}).get("dict")
    if not isinstance(name, str) or not isinstance(pairs, list):
        raise ValueError("not an encoded object: %.80r" % (body,))
    if into is not None and class_name(into) != name:
        raise ValueError("saved a %s, restoring into a %s" % (name, class_name(into)))
    state = {}
    for key, value in pairs:
        if not isinstance(key, str):
            raise ValueError("the saved attributes of a %s have a key %.40r that is not a name" % (name, key))
        current = getattr(into, key, None) if into is not None else None
        saved_class = value["object"].get("class") if isinstance(value, dict) and isinstance(value.get("object"), dict) \
            else None
        same = current is not None and saved_class == class_name(current)
        state[key] = decode(value, arrays, classes, into=current if same else None)
    if into is not None:
        into.__dict__.update(state)
        return into
    cls = next((c for c in classes if "%s.%s" % (c.__module__, c.__qualname__) == name), None)
    if cls is None:
        raise ValueError("a %s cannot be rebuilt here: only %s can" % (name, ", ".join(sorted(c.__name__ for c in classes))))
    obj = cls.__new__(cls)  # (what pickle does, without calling anything the data names)
    obj.__dict__.update(state)
    return obj


def _array(body, arrays):
    if isinstance(body, str):
        if arrays is None or body not in arrays:
            raise ValueError("encoded plain data names an array %r that is not there" % body)
        return np.asarray(arrays[body])
    dtype = np.dtype(body["dtype"])
    if dtype.kind not in NUMERIC_KINDS:
        raise ValueError("an array of dtype %s is not plain data" % dtype)
    return np.frombuffer(base64.b64decode(body["bytes"]), dtype).reshape(body["shape"]).copy()


def _hashable(key):
    return tuple(_hashable(k) for k in key) if isinstance(key, (list, tuple)) else key
