"""The compression settings a dist store accepts, and what each key is sent with.

``kv.set_gradient_compression(params)`` takes:

- ``{'type': 'none'}``: dense float32 pushes.
- ``{'type': '2bit', 'threshold': t}``: MXNet's built-in 2bit, run by MXNet's own kernels on the workers
  (quantize, residual) and on the servers (dequantize), so it can be compared with mxnet_gc's codecs.
- ``{'type': 'gc_2bit', 'threshold': t}``: mxnet_gc's 2bit codec (same encoding, our kernels).
- ``{'type': '4bit', 'thresholds': [t1, ..., t7]}``: mxnet_gc's 4bit codec ('thresholds' defaults to
  'auto' here; a codec alone, ``codecs.create``, to 'medium'; 'rounding' to 'nearest').  ``'per_key'``, a dict from
  key to thresholds (a list, a ThresholdGroup or a group name), gives some keys their own group.
  ``'thresholds': 'auto'``: each key gets a ladder whose top level is above its largest gradient values,
  measured during the last FIT_STEPS steps of the warm-up (mxnet_gc/level_fit.py) and agreed by the
  workers; the store then holds them as ``per_key`` (``fitted``).
- any other codec type registered in ``mxnet_gc.codecs``, with its parameters.
- ``{'type': 'lgc', 'density': d, ...}``: learned gradient compression (mxnet_gc/lgc): a schedule
  of phases run by the store itself (kvstore/lgc_rounds.py; its rounds lgc_ps.py or lgc_ring.py).

With an mxnet_gc codec, ``'compressed_pull': True`` (4bit's default; ``False``: float32 pulls, as MXNet's
2bit) also compresses what workers pull: the servers
re-encode the sum with their own residual, on the codec's levels times the number of workers, or, with
the optimizer on the servers, send the weights' differences (kvstore/ps/weight_pulls.py); ``'warmup_steps': n``
(default DEFAULT_WARMUP_STEPS) pushes dense float32 gradients for the first n steps before the codec
starts: from a random initialization the first gradients are large and their quantization error can
stop a network from learning at all (0: the codec from the first step, as MXNet's own 2bit).
"""
import json

from .. import codecs
from ..codecs.threshold_group import ThresholdGroup
from .. import schedule
from ..lgc.options import LGCOptions
from ..schedule import Phase

MXNET_TYPES = ("none", "2bit")  # served by MXNet's own code path
DEFAULT_WARMUP_STEPS = 50
FIT_STEPS = 20  # warm-up steps that measure the gradients for 'thresholds': 'auto' (its last ones)
AUTO = "auto"
GC_PREFIX = "gc_"  # mxnet_gc's implementation of a name MXNet also uses
# A store's options beside an mxnet_gc codec's parameters: (name, default, accepted values), as codecs.options
STORE_OPTIONS = [
    ("compressed_pull", "True for 4bit (but on dist_async), else False",
     "True or False: the pulls compressed too (the sum, or with the optimizer on the servers the weights' changes)"),
    ("warmup_steps", DEFAULT_WARMUP_STEPS, "an int >= 0: dense float32 pushes before the codec starts"),
    ("per_key", {}, "{key: levels}: other levels for some keys (4bit's thresholds, gc_2bit's threshold)"),
]


def supported_types():
    return list(MXNET_TYPES) + sorted([store_name(t) for t in codecs.available()] + ["lgc"])


def store_name(codec_type):
    """A codec's compression type on a store: its own, or 'gc_' + it where MXNet's stores use the name."""
    return GC_PREFIX + codec_type if codec_type in MXNET_TYPES else codec_type


def _codec_type(kind):
    """The mxnet_gc codec type behind a compression type, or None for MXNet's own types."""
    if kind in MXNET_TYPES:
        return None
    base = kind[len(GC_PREFIX):] if kind.startswith(GC_PREFIX) else kind
    if base in codecs.available() and (kind.startswith(GC_PREFIX) == (base in MXNET_TYPES)):
        return base
    raise ValueError("unknown gradient compression type %r; supported types: %s"
                     % (kind, ", ".join(supported_types())))


def _levels(value):
    return list(value.levels) if isinstance(value, ThresholdGroup) else value


class Compression:
    """A validated compression setting: ``config`` is canonical JSON, equal on every worker that agrees.

    ``num_workers``: the job's, when known (a store's): with 'compressed_pull' each codec's pull codec is
    then made too, so that levels the servers' sum cannot be re-encoded on are refused here, not at the
    first compressed step.  ``pulls_compressed``: whether pulls are compressed when the params do not say
    (False on a store that pulls only float32, dist_async).
    """

    def __init__(self, params, num_workers=None, pulls_compressed=True):
        if not isinstance(params, dict) or "type" not in params:
            raise ValueError("gradient compression params must be a dict with a 'type' (one of %s), such as "
                             "{'type': '4bit'}, got %r" % (", ".join(supported_types()), params))
        params = dict(params)
        kind = params.pop("type")
        self.type = kind
        self.lgc = kind == "lgc"
        self.warmup_steps = 0
        self.fits_levels = False
        self.num_workers = num_workers
        if self.lgc:  # a method with phases, not one codec: the store runs it (codec_for gives None)
            self.codec_class = None
            self.codec_type, self.compressed_pull, self._default, self._per_key = None, False, None, {}
            self.pull_given = False
            self.config = LGCOptions(params).config
            return
        self.codec_type = _codec_type(kind)
        cls = self.codec_class = codecs.codec_class(self.codec_type) if self.codec_type else None
        self._fit = cls and cls.level_fit  # (what the codec declares: mxnet_gc/codecs/base.py)
        per_key = params.pop("per_key", {}) or {}
        self.pull_given = "compressed_pull" in params  # (else the default: it gives way where it cannot run)
        self.compressed_pull = params.pop("compressed_pull",
                                          pulls_compressed and bool(cls and cls.pulls_compressed_by_default))
        if not isinstance(self.compressed_pull, bool):
            raise ValueError("'compressed_pull' must be True or False, got %r" % (self.compressed_pull,))
        if self.codec_type is None:
            self._check_mxnet_params(kind, params)
            if per_key or self.compressed_pull:
                raise ValueError("'per_key' and 'compressed_pull' need an mxnet_gc codec, not %r" % kind)
            self.config = dict(params, type=kind)
            self._default = None
            self._per_key = {}
            return
        if not isinstance(per_key, dict):
            raise ValueError("'per_key' must be a dict from key to codec parameters, got %r" % (per_key,))
        self.warmup_steps = params.pop("warmup_steps", DEFAULT_WARMUP_STEPS)
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ValueError("'warmup_steps' must be an int >= 0, got %r" % (self.warmup_steps,))
        fit = self._fit
        if cls.fitted_by_default and fit.field not in params:  # the store's default: levels fitted
            params[fit.field] = AUTO
        self.fits_levels = fit is not None and params.get(fit.field) == AUTO
        if self.fits_levels:
            field = fit.field
            if self.warmup_steps < 1 and not per_key:
                raise ValueError("%s: '%s': 'auto' fits each key's levels to its gradients during the dense warm-up; "
                                 "'warmup_steps' must be at least 1, got 0, or give '%s' (%s)"
                                 % (self.codec_type, field, field, fit.described))
            # fitted levels round to nearest unless asked, whatever the codec's default: gc_2bit's fitted
            # threshold with floor rounding loses most of its accuracy under momentum on the servers
            params.setdefault("rounding", "nearest")
            self._create(dict(params, **{field: fit.placeholder}))  # (checks the other parameters)
            self._default = None
            default = {"type": self.codec_type, field: AUTO, "rounding": params["rounding"]}
        else:
            self._default = self._pullable(self._create(params), self.num_workers)
            default = self._default.config()
        self._codec_params = params
        self._params = dict(params, type=kind, compressed_pull=self.compressed_pull, warmup_steps=self.warmup_steps,
                            per_key={str(k): _levels(v) for k, v in per_key.items()})
        self._per_key = {str(k): self._key_codec(k, v) for k, v in per_key.items()}
        self.config = {"type": kind, "default": default, "compressed_pull": self.compressed_pull,
                       "per_key": {k: c.config() for k, c in sorted(self._per_key.items())},
                       "warmup_steps": self.warmup_steps}

    @property
    def rounding(self):
        """The threshold codecs' rounding (their default unless the params say)."""
        return self._params.get("rounding", self.codec_class.default_rounding if self.codec_class else "nearest")

    @property
    def levels_of(self):
        """For 'auto': a key's levels from its largest gradient value (level_fit.py)."""
        return self._fit.levels_of

    @property
    def fit_steps(self):
        """The warm-up's last steps that measure the gradients for 'thresholds': 'auto' (0 otherwise)."""
        return min(FIT_STEPS, self.warmup_steps) if self.fits_levels else 0

    def phases(self):
        """The phases of a store's own step clock under this compression (mxnet_gc/schedule.py): LGC's, or
        the warm-up's dense steps (the last ``fit_steps`` of them measuring 'auto' levels), then the codec."""
        if self.lgc:
            return LGCOptions(self.config).phases()
        fit = self.fit_steps
        phases = [Phase(schedule.WARMUP, self.warmup_steps - fit, schedule.DENSE)] if self.warmup_steps > fit else []
        if fit:
            phases.append(Phase(schedule.FIT_LEVELS, fit, schedule.DENSE))
        return phases + [Phase(schedule.CODEC, None, schedule.COMPRESSED)]

    def fitted(self, levels):
        """This compression with ``levels`` ({key: levels}) as each key's thresholds in place of 'auto'."""
        per_key = {str(k): v for k, v in levels.items()}
        per_key.update(self._params["per_key"])  # (levels the user gave win)
        return Compression(dict(self._params, per_key=per_key), self.num_workers)  # (compressed_pull is in _params)

    def as_fitted(self, config):
        """This 'thresholds': 'auto' compression with the levels a fitted one (its ``config``) holds, or
        None when ``config`` is not a fit of this compression."""
        if not self.fits_levels or self._per_key.keys() - self._params["per_key"].keys():
            return None
        try:
            candidate = self.fitted({k: self._fit.levels(c) for k, c in config.get("per_key", {}).items()})
        except (AttributeError, KeyError, TypeError, ValueError):
            return None
        return candidate if json.loads(json.dumps(candidate.config)) == config else None

    def with_float32_pulls(self):
        """This compression with 'compressed_pull': False."""
        return Compression(dict(self._params, compressed_pull=False), self.num_workers)

    def weight_pull_codec(self, largest):
        """The codec of a key's compressed weight pull (the optimizer on the servers: kvstore/ps/weight_pulls.py):
        the key's codec type on levels fitted, as 'auto' fits gradients (``levels_of``), to ``largest``, its
        weights' largest change in a step; 8bit, which scales each segment itself, as it is."""
        if self._fit is None:
            return self._create(self._codec_params).pull_codec(1)
        return self._create(dict(self._codec_params, **{self._fit.field: self._fit.param(self.levels_of(largest))})
                            ).pull_codec(1)

    def check_fit(self, levels, num_workers):
        """Raises ValueError (the codec's reason) unless a key can be sent on ``levels`` fitted by 'auto' (and,
        with 'compressed_pull', its sum over ``num_workers`` pulled on them)."""
        self._codec_with(levels, num_workers)

    def _key_codec(self, key, value):
        """The codec of ``key`` in 'per_key' (its errors name the key)."""
        if self._fit is not None and self._fit.multi and _levels(value) == AUTO:
            raise ValueError("'per_key'[%r]: 'auto' applies to every key ('thresholds': 'auto')" % (key,))
        try:
            return self._codec_with(value, self.num_workers)
        except ValueError as e:
            raise ValueError("'per_key'[%r]: %s" % (key, e)) from None

    def _codec_with(self, value, num_workers):
        """The codec with a key's own ``value``: the levels of a codec that takes a list of them (4bit's), the one
        level of a codec that takes one (gc_2bit's) as a list (a fit), or a dict of parameters."""
        fit = self._fit
        if fit is not None and fit.multi:
            override = {fit.field: _levels(value)}
        elif fit is not None and isinstance(value, list) and len(value) == 1:  # a fitted level
            override = {fit.field: value[0]}
        elif isinstance(value, dict):
            override = value
        else:
            raise ValueError("must be a dict of %s parameters, got %r" % (self.codec_type, value))
        return self._pullable(self._create(dict(self._codec_params, **override)), num_workers)

    def _create(self, params):
        """The codec of ``params`` (without 'type'); an unknown parameter's message lists the store's options too."""
        return codecs.create(dict(params, type=self.codec_type), also_accepted=STORE_OPTIONS)

    def _pullable(self, codec, num_workers):
        """``codec``, refused when 'compressed_pull' could not re-encode the servers' sum of ``num_workers``
        pushes with it: a threshold codec pulls on its levels times num_workers, which must stay finite in float32."""
        if self.compressed_pull and num_workers:
            try:
                codec.pull_codec(num_workers)
            except ValueError as e:
                levels = codec.group.levels  # (only the threshold codecs' pull codecs have limits)
                what = "threshold %g" % levels[0] if len(levels) == 1 else "top level %g" % levels[-1]
                raise ValueError("%s: 'compressed_pull' with %d workers re-encodes the servers' sum on the levels "
                                 "times %d, and the %s is too large for that in float32 (%s); give smaller levels, or "
                                 "leave 'compressed_pull' off" % (self.type, num_workers, num_workers, what, e)) from None
        return codec

    @staticmethod
    def _check_mxnet_params(kind, params):
        allowed = {"none": set(), "2bit": {"threshold"}}[kind]
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise ValueError("%s: unknown parameter(s) %s; accepted: %s"
                             % (kind, ", ".join(map(repr, unknown)), ", ".join(["type"] + sorted(allowed))))
        if kind == "2bit":
            codecs.create({"type": "2bit", **params})  # the same checks as ours: threshold > 0, finite

    @property
    def runs_own_phases(self):
        """Whether the method runs phases of its own that its store switches between (LGC's): a trainer
        follows them and sets no compression when a phase changes."""
        return self.lgc

    @property
    def needs_workers_optimizer(self):
        """Whether the method's pulls must be the gradients' sums, for an optimizer on the workers (LGC's:
        the sums are decoded there)."""
        return self.lgc

    @property
    def is_mxnet(self):
        return self.codec_type is None and not self.lgc

    def codec_for(self, key):
        """The codec for a user key, or None when the pushes are dense float32 (MXNet's types)."""
        if self.codec_type is None:
            return None
        codec = self._per_key.get(str(key), self._default)
        if codec is None:
            raise ValueError("key %r has no levels yet: 'thresholds': 'auto' fits them during the warm-up" % (key,))
        return codec
