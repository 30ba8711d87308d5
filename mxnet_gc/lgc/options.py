"""The options of learned gradient compression ('lgc'), checked, and the phases they make.

``{'type': 'lgc', 'density': 1e-3, ...}``; every field, its default and its meaning is in ``OPTIONS``
(docs/lgc.md's table is made from it).  A bad field raises ValueError naming it.  ``phases()`` is the run's schedule:

    dense       dense_steps steps of float32 pushes
    sparse-1..  the ramp: layerwise_topk (with error feedback and ``momentum``) at densities falling
                geometrically from ramp_start to ``density``, ramp_steps steps in all
    train       ae_steps steps of leader-indexed sparse pushes at ``density``; the servers train the
                autoencoder on the workers' vectors
    lgc         to the end: the leader sends the code of its vector, every worker its innovation (with
                ``codes`` 'own': the leader its indices first, then every worker the code of its own
                vector there and its innovation; with ``index`` 'union' the indices are drawn in turns
                from every worker's top-k, each sending its candidates first); with
                ``fine_tune_every`` N > 0, every N-th step of it is a train step again (``tunes``), after
                which the workers take the servers' new weights

With ``autoencoder=False`` the ramp's last stage runs to the end instead: DGC with LGC's ramp and dense
tensors, to measure what the autoencoder adds.
"""
import difflib
import fnmatch
import math
import numbers

from ..schedule import AE_TRAIN, COMPRESSED, DENSE, LGC, SPARSE_PREFIX, WARMUP, Phase, Schedule

# every field: (default, meaning); docs/lgc.md's table of options is made from it (tools/option_tables.py)
OPTIONS = {
    "density": (1e-3, "fraction of each coded tensor in the leader's index set (the ramp's last density)"),
    "innovation_density": (1e-5, "fraction of each coded tensor a worker sends exact (at least 1 value; at most "
                                 "`density`)"),
    "dense_steps": (200, "steps of the dense phase"),
    "ramp_steps": (200, "steps of the sparse ramp (0: none)"),
    "ramp_start": (0.25, "the ramp's first density"),
    "ramp_stages": (4, "stages of the ramp"),
    "ae_steps": (300, "steps of the train phase"),
    "momentum": (0.0, "DGC's momentum correction on the workers, in the ramp and the coded tensors' accumulators "
                      "(it replaces the optimizer's momentum: `mxnet_gc.gluon.Trainer` refuses both at once; 0: "
                      "error feedback only)"),
    "signs": (False, "with `codes` 'own': every worker sends its vector's signs (a bit a value) with its code, which "
                     "its decoder reads in the innovation channel"),
    "dense_momentum": (False, "with `momentum`: the tensors sent dense push DGC's velocity too; False: their "
                              "gradients, plain SGD with an optimizer without momentum (measured the better of the "
                              "two)"),
    "leader": ("rotate", "'rotate' (rank step mod W) or a fixed rank"),
    "order": ("index", "the vector's order: the leader's indices ascending, or by decreasing \\|value\\| "
                       "('magnitude')"),
    "error_feedback": ("zero", "what a worker's accumulator keeps of a coded coordinate: 'zero' (DGC's rule), "
                               "'subtract' what was applied, or 'clip': that clamped between 0 and the "
                               "accumulator's value"),
    "codes": ("leader", "lgc phase on the parameter server: the leader's code stands for every worker ('leader'), "
                        "or every worker sends the code of its own vector at the leader's indices after an extra "
                        "round ('own'; refused on a ring)"),
    "index": ("leader", "the index set of a step: the leader's top-k ('leader'), or drawn in turns from every "
                        "worker's top ceil(k / W) ('union': every worker sends them; on the parameter server needs "
                        "`codes` 'own')"),
    "encoder_channels": ([8, 16, 16, 8], "widths of the 4 stride-2 convolutions ([64, 128, 256, 64]: the larger "
                                         "size)"),
    "latent_channels": (4, "channels of the code"),
    "ae_lr": (1e-2, "Adam's learning rate"),
    "ae_replay": (8, "steps of vectors in the servers' replay buffer"),
    "ae_window": (1024, "values of each buffered vector one training step uses (a window at a multiple of 16, "
                        "drawn from `seed` and the step; 0: the whole vector): a training step's cost stops growing "
                        "with the vector"),
    "code_weight": (0.1, "weight of the term pulling the workers' codes together"),
    "dense_patterns": (None, "names (fnmatch patterns) that stay dense; None: the first and last tensor of at least "
                             "2 dimensions"),
    "seed": (0, "the autoencoder's initial weights"),
    "fine_tune_every": (0, "lgc phase: every N-th step is a train step again, after which the workers pull the new "
                           "weights (0: the autoencoder stays frozen)"),
    "autoencoder": (True, "False: the ramp's last stage runs to the end (DGC with LGC's ramp and dense tensors: the "
                          "ablation that shows the autoencoder's share)"),
}
DEFAULTS = {field: default for field, (default, _) in OPTIONS.items()}
STRIDE = 16  # 4 stride-2 convolutions: the coded vector is padded to a multiple of this


def _fail(field, must, value):
    raise ValueError("lgc: %r must be %s, got %r" % (field, must, value))


def _real(field, value, low, high, low_open=True, high_open=True):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        _fail(field, "a finite number", value)
    if (value <= low if low_open else value < low) or (value >= high if high_open else value > high):
        _fail(field, "in %s%g, %g%s" % ("(" if low_open else "[", low, high, ")" if high_open else "]"), value)
    return float(value)


def _int(field, value, low):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        _fail(field, "an int >= %d" % low, value)
    return value


class LGCOptions:
    """Validated 'lgc' parameters; ``config`` is their canonical dict (equal on workers that agree)."""

    def __init__(self, params):
        params = dict(params)
        params.pop("type", None)
        unknown = sorted(set(params) - set(DEFAULTS))
        if unknown:
            close = [difflib.get_close_matches(u, list(DEFAULTS), 1) for u in unknown]
            raise ValueError("lgc: unknown parameter(s) %s%s; accepted (with their defaults): %s"
                             % (", ".join(map(repr, unknown)),
                                "".join("; did you mean %r?" % c[0] for c in close if c),
                                ", ".join("%s (%r)" % (k, DEFAULTS[k]) for k in sorted(DEFAULTS))))
        p = dict(DEFAULTS, **params)
        self.density = _real("density", p["density"], 0, 1)
        self.innovation_density = _real("innovation_density", p["innovation_density"], 0, 1)
        if self.innovation_density > self.density:
            _fail("innovation_density", "at most density (%g)" % self.density, self.innovation_density)
        self.dense_steps = _int("dense_steps", p["dense_steps"], 0)
        self.ramp_steps = _int("ramp_steps", p["ramp_steps"], 0)
        self.ramp_start = _real("ramp_start", p["ramp_start"], 0, 1, high_open=False)
        if self.ramp_start < self.density:
            if "ramp_start" not in params:
                raise ValueError("lgc: 'density' %g is above the sparse ramp's default start, 'ramp_start' %g: give a "
                                 "'ramp_start' of at least %g (or a smaller density)"
                                 % (self.density, self.ramp_start, self.density))
            _fail("ramp_start", "at least density (%g)" % self.density, self.ramp_start)
        self.ramp_stages = _int("ramp_stages", p["ramp_stages"], 1)
        if self.ramp_steps and self.ramp_steps < self.ramp_stages:
            _fail("ramp_steps", "0 or at least ramp_stages (%d)" % self.ramp_stages, self.ramp_steps)
        self.ae_steps = _int("ae_steps", p["ae_steps"], 1)
        self.momentum = _real("momentum", p["momentum"], 0, 1, low_open=False)
        if not isinstance(p["dense_momentum"], bool):
            _fail("dense_momentum", "True or False", p["dense_momentum"])
        if p["dense_momentum"] and not self.momentum:
            _fail("dense_momentum", "False without 'momentum'", p["dense_momentum"])
        self.dense_momentum = p["dense_momentum"]
        leader = p["leader"]
        if leader != "rotate" and (isinstance(leader, bool) or not isinstance(leader, int) or leader < 0):
            _fail("leader", "'rotate' or a worker rank", leader)
        self.leader = leader
        if p["order"] not in ("index", "magnitude"):
            _fail("order", "'index' or 'magnitude'", p["order"])
        self.order = p["order"]
        if p["error_feedback"] not in ("clip", "subtract", "zero"):
            _fail("error_feedback", "'zero', 'subtract' or 'clip'", p["error_feedback"])
        self.error_feedback = p["error_feedback"]
        if p["codes"] not in ("leader", "own"):
            _fail("codes", "'leader' or 'own'", p["codes"])
        self.codes = p["codes"]
        if p["index"] not in ("leader", "union"):
            _fail("index", "'leader' or 'union'", p["index"])
        self.index = p["index"]
        if not isinstance(p["signs"], bool):
            _fail("signs", "True or False", p["signs"])
        if p["signs"] and self.codes != "own":
            _fail("signs", "False without codes 'own' (the signs travel with a worker's own code)", p["signs"])
        self.signs = p["signs"]
        channels = p["encoder_channels"]
        if (not isinstance(channels, (list, tuple)) or len(channels) != 4
                or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in channels)):
            _fail("encoder_channels", "4 ints >= 1 (one per stride-2 convolution)", channels)
        self.encoder_channels = [int(c) for c in channels]
        self.latent_channels = _int("latent_channels", p["latent_channels"], 1)
        self.ae_lr = _real("ae_lr", p["ae_lr"], 0, 1)
        self.ae_replay = _int("ae_replay", p["ae_replay"], 1)
        self.ae_window = _int("ae_window", p["ae_window"], 0)
        if self.ae_window % STRIDE:
            _fail("ae_window", "0 or a multiple of %d" % STRIDE, self.ae_window)
        self.code_weight = _real("code_weight", p["code_weight"], 0, math.inf, low_open=False)
        patterns = p["dense_patterns"]
        if patterns is not None and (not isinstance(patterns, (list, tuple))
                                     or not all(isinstance(x, str) for x in patterns)):
            _fail("dense_patterns", "None or a list of name patterns (fnmatch)", patterns)
        self.dense_patterns = None if patterns is None else list(patterns)
        self.seed = _int("seed", p["seed"], 0)
        if not isinstance(p["autoencoder"], bool):
            _fail("autoencoder", "True or False", p["autoencoder"])
        self.autoencoder = p["autoencoder"]
        if not self.autoencoder and not self.ramp_steps:
            _fail("ramp_steps", "at least ramp_stages without the autoencoder (its last stage runs to the end)",
                  self.ramp_steps)
        self.fine_tune_every = _int("fine_tune_every", p["fine_tune_every"], 0)
        if self.fine_tune_every and not self.autoencoder:
            _fail("fine_tune_every", "0 without the autoencoder", self.fine_tune_every)
        self.config = {"type": "lgc", **{k: getattr(self, k) for k in DEFAULTS}}
        self._lgc_first = Schedule(self.phases()).start(LGC) if self.autoencoder else None

    def ramp_densities(self):
        """The densities of the ramp's stages: geometric from ramp_start to density (its last stage)."""
        if self.ramp_stages == 1:
            return [self.density]
        ratio = self.density / self.ramp_start
        return [self.ramp_start * ratio ** (i / (self.ramp_stages - 1)) for i in range(self.ramp_stages)]

    def phases(self):
        """The run's phases: dense, the ramp's sparse stages, train (the autoencoder), lgc."""
        phases = [Phase(WARMUP, self.dense_steps, DENSE)] if self.dense_steps else []
        if self.ramp_steps:
            sizes = [self.ramp_steps // self.ramp_stages + (i < self.ramp_steps % self.ramp_stages)
                     for i in range(self.ramp_stages)]
            phases += [Phase("%s%d" % (SPARSE_PREFIX, i + 1), n, COMPRESSED) for i, n in enumerate(sizes)]
        if not self.autoencoder:  # the last stage to the end
            return phases[:-1] + [Phase(phases[-1].name, None, COMPRESSED)]
        return phases + [Phase(AE_TRAIN, self.ae_steps, COMPRESSED), Phase(LGC, None, COMPRESSED)]

    def tunes(self, step):
        """Whether ``step`` of the lgc phase trains the autoencoder (the last of every ``fine_tune_every``)."""
        if not self.fine_tune_every:
            return False
        first = self._lgc_first
        return step >= first and (step - first) % self.fine_tune_every == self.fine_tune_every - 1

    def trains(self, phase_name, step):
        """Whether a step of ``phase_name`` sends exact values at the leader's indices and trains the
        autoencoder: every step of the train phase, and the lgc phase's fine-tuning steps."""
        return phase_name == AE_TRAIN or (phase_name == LGC and self.tunes(step))

    def index_first(self, phase_name, step):
        """Whether a step's leader sends its indices (INDEX) first and the workers answer at them: the
        steps that train, and with codes 'own' every lgc step."""
        return self.trains(phase_name, step) or (phase_name == LGC and self.codes == "own")

    def candidates_first(self, phase_name, step):
        """Whether every worker sends its candidate indices (CAND) and the servers make the step's index set
        from them: the steps whose indices go first, with index 'union'."""
        return self.index == "union" and self.index_first(phase_name, step)

    def stage_density(self, phase_name):
        """The layerwise_topk density of a ramp phase."""
        return self.ramp_densities()[int(phase_name.split("-")[1]) - 1]

    def sparse_codec(self, phase_name):
        """The layerwise_topk params of a ramp phase."""
        return {"type": "layerwise_topk", "density": self.stage_density(phase_name), "momentum": self.momentum}

    def leader_at(self, step, num_workers):
        """The rank whose indices are coded at ``step``."""
        if self.leader == "rotate":
            return step % num_workers
        if self.leader >= num_workers:
            raise ValueError("lgc: 'leader' %d is not a worker rank (%d workers)" % (self.leader, num_workers))
        return self.leader

    def coded_keys(self, keys, shapes, names):
        """The keys coded by the autoencoder: tensors of >= 2 dimensions, except those whose name matches
        ``dense_patterns`` or, by default, the first and the last of them (in the order given)."""
        multi = [k for k, s in zip(keys, shapes) if len(s) >= 2]
        if self.dense_patterns is None:
            return multi[1:-1]
        return [k for k in multi if not any(fnmatch.fnmatchcase(str(names.get(k, k)), pat)
                                            for pat in self.dense_patterns)]


def count(fraction, n):
    """Values a fraction of an n-value tensor holds: round(fraction * n), at least 1, at most n."""
    return min(n, max(1, int(math.floor(fraction * n + 0.5))))
