"""The codec registry: a ``type`` name maps to a codec class; ``create(params)`` builds one.

A codec class registers itself with ``@register``; its constructor takes the params dict minus
``type`` and raises ValueError naming any bad or unknown field (a class's ``hints`` say what to use
instead of a parameter it does not take).  'gc_2bit', the stores' name of mxnet_gc's 2bit kernels, is
'2bit' here: one encoding, MXNet's (mxnet_gc has only its own kernels; on a store '2bit' runs MXNet's).
"""
import difflib
import inspect

_CODECS = {}
ALIASES = {"gc_2bit": "2bit"}


def register(cls):
    """Class decorator: makes ``cls`` available under ``cls.type``.  For mxnet_gc's own codecs only: the
    stores run every codec through the C++ message plan (src_cpp/), so a codec needs kernels there."""
    if cls.type in _CODECS:
        raise ValueError("codec type %r is registered twice" % cls.type)
    _CODECS[cls.type] = cls
    return cls


def codec_class(kind):
    """The class registered under ``kind`` (or its alias)."""
    return _CODECS[ALIASES.get(kind, kind)]


def available():
    """Sorted list of registered codec type names."""
    return sorted(_CODECS)


def parameters(cls):
    """The parameter names a codec class's constructor takes (none for one without a constructor of its
    own, such as '8bit': object's ``*args, **kwargs`` are not parameters)."""
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [name for name, p in inspect.signature(cls.__init__).parameters.items()
            if name != "self" and p.kind in named]


def options(cls):
    """A codec class's parameter table, [(name, default, accepted values)]: its constructor's parameters
    and defaults, and what each takes (the class's ``values``).  Error messages and docs/codecs.md's
    table (tools/option_tables.py) are made from it."""
    signature = inspect.signature(cls.__init__)
    return [(name, signature.parameters[name].default, cls.values[name]) for name in parameters(cls)]


def listing(table):
    """The accepted names of an options table, each with its values: "name (values), ..."."""
    return ", ".join("%s (%s)" % (name, values) for name, _, values in table)


def create(params, also_accepted=()):
    """Builds a codec from a config such as ``{'type': '4bit', 'thresholds': [...]}``.

    A codec instance is returned as it is.  ``also_accepted``: the caller's own options beside the codec's
    parameters (a store's), as an options table, listed with them when a parameter is unknown.
    """
    from .base import Codec

    if isinstance(params, Codec):
        return params
    if not isinstance(params, dict):
        raise ValueError("codec params must be a dict with a 'type' key, got %r" % (params,))
    if "type" not in params:
        raise ValueError("codec params need a 'type' (one of %s), got %r" % (", ".join(available()), params))
    kind = ALIASES.get(params["type"], params["type"])
    if kind not in _CODECS:
        raise ValueError("unknown codec type %r; supported types: %s" % (kind, ", ".join(available())))
    cls = _CODECS[kind]
    kwargs = {k: v for k, v in params.items() if k != "type"}
    unknown = sorted(set(kwargs) - set(parameters(cls)))
    if unknown:
        accepted = parameters(cls) + [name for name, _, _ in also_accepted]
        own, hints = getattr(cls, "hints", {}), []
        for u in unknown:
            close = difflib.get_close_matches(u, accepted, 1)
            if u in own or close:
                hints.append(own.get(u) or "did you mean %r?" % close[0])
        mine = listing(options(cls)) or "none of its own"
        theirs = "; a store's: %s" % listing(also_accepted) if also_accepted else ""
        raise ValueError("%s: unknown parameter(s) %s%s; accepted: %s%s"
                         % (kind, ", ".join(map(repr, unknown)), "".join("; " + h for h in hints), mine, theirs))
    return cls(**kwargs)
