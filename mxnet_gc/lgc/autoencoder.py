"""The autoencoder of learned gradient compression: one encoder, W decoders (one per worker's position
after the step's leader), one decoder of the workers' mean.

A coded vector (P values, P a multiple of 16) enters as one channel.  The encoder has four 1-D
convolutions of stride 2 (kernel 4, LeakyReLU) and a 1x1 convolution to ``latent`` channels: a code
of latent * P / 16 floats (4x shorter than the vector with 4 channels).  A decoder mirrors it with
transposed convolutions back to P values, then mixes in the worker's innovation (its own exact
values, as a second channel; with option signs that channel holds +-0.25 by the sign of each of the
worker's other values) with a last convolution: the estimate of that worker's vector from the
leader's code.  Decoder d serves worker (leader + d) mod W: decoder 0 reconstructs the leader's own
vector, the others estimate another worker's from it.  (With one decoder per worker rank and a rotating
leader, each decoder had to serve both cases without knowing which it was in: it learned a compromise
whose estimates of other workers' vectors were larger than the values, relative squared error 1.5 - 1.8,
worse than zeros, while its reconstructions of the leader's vector were at 0.5.)  With ``own_codes``
every worker's vector comes with its own code, and one decoder reconstructs each from it.

The mean decoder (same shape) estimates the workers' mean vector from the mean of their codes and the
mean of their innovation channels: on a ring (no server) the codes are summed by an allreduce and
every worker decodes the sum.

Training (``AutoencoderTrainer``): on a replay buffer of the last steps' vectors of every worker,
loss = mean over workers of |decoder_d(code of the leader's vector, innovation_w) - vector_w|^2, d = w - leader mod W
       + |decoder_mean(mean_w code_w, mean_w innovation_w) - mean_w vector_w|^2
       + code_weight * mean |code_w - code_leader|^2,
(with ``own_codes``: mean over workers of |decoder(code_w, innovation_w) - vector_w|^2 + the mean decoder's
term; the codes need not agree)
where the mean decoder's term does not reach the encoder (its codes enter detached): the encoder and
the workers' decoders learn as without it, and the mean decoder learns to read their codes' mean.
One Adam step per training step, on every entry of the buffer; with ``window`` W > 0 each entry
contributes a window of W values (a multiple of 16, at a multiple of 16, drawn from a generator of
``seed`` and the step), so that a step's cost does not grow with the vector's length.  Weights start
from a numpy generator of ``seed`` (not MXNet's random state), so training is deterministic.  The loss
is one hybridized block (its forward and backward are one cached graph each, not ~55 operators) and
the Adam step one multi-tensor update per 50 weights (MULTI_UPDATE_MAX).

Every forward runs in training mode: in inference mode MXNet's MKL-DNN convolutions reorder their
weight arrays in place, after which new weights (``set_flat``) cannot be written into them.  The
blocks have no dropout or batch norm, so the two modes compute the same.
"""
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from .. import _mx

SLOPE = 0.2  # LeakyReLU
MULTI_UPDATE_MAX = 50  # weights per call of MXNet 1.9.1's multi_adamw_update (more overrun its kernel's table)


class Encoder(gluon.HybridBlock):
    def __init__(self, channels, latent, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.body = gluon.nn.HybridSequential()
            for c in channels:
                self.body.add(gluon.nn.Conv1D(c, 4, strides=2, padding=1), gluon.nn.LeakyReLU(SLOPE))
            self.body.add(gluon.nn.Conv1D(latent, 1))

    def hybrid_forward(self, F, x):
        return self.body(x)


class Decoder(gluon.HybridBlock):
    def __init__(self, channels, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.body = gluon.nn.HybridSequential()
            self.body.add(gluon.nn.Conv1D(channels[-1], 1), gluon.nn.LeakyReLU(SLOPE))
            for c in list(reversed(channels))[1:] + [channels[0]]:
                self.body.add(gluon.nn.Conv1DTranspose(c, 4, strides=2, padding=1), gluon.nn.LeakyReLU(SLOPE))
            self.mix = gluon.nn.Conv1D(1, 3, padding=1)

    def hybrid_forward(self, F, code, innovation):
        return self.mix(F.concat(self.body(code), innovation, dim=1))


class EveryDecoder(gluon.HybridBlock):
    """Every decoder on one code, decoder d with row d of the innovation channels: (W, 1, P) estimates
    from a code (1, C, P / 16) and channels (W, 1, P), as one graph (a server's per-step decode)."""

    def __init__(self, decoders, **kwargs):
        super().__init__(**kwargs)
        self.num_workers = len(decoders)
        for w, d in enumerate(decoders):
            setattr(self, "decoder%d" % w, d)

    def hybrid_forward(self, F, code, innovations):
        return F.concat(*[getattr(self, "decoder%d" % w)(code, F.slice_axis(innovations, axis=0, begin=w, end=w + 1))
                          for w in range(self.num_workers)], dim=0)


class Autoencoder:
    """The encoder, the decoders (by position after the leader) and the mean decoder, their weights as one
    flat float32 vector."""

    def __init__(self, num_workers, channels, latent, seed, own_codes=False):
        """``own_codes``: each worker's vector is decoded from its own code, by one decoder (else one decoder
        per position after the leader, on the leader's code)."""
        self.num_workers, self.own_codes = num_workers, own_codes
        self.encoder = Encoder(channels, latent, prefix="lgc_encoder_")
        self.decoders = [Decoder(channels, prefix="lgc_decoder%d_" % w) for w in range(1 if own_codes else num_workers)]
        self.mean_decoder = Decoder(channels, prefix="lgc_decoder_mean_")
        rng = np.random.default_rng(seed)
        for block in self.blocks():
            block.initialize(mx.init.Zero())
            block.hybridize(static_alloc=True)
        self.every_decoder = EveryDecoder(self.decoders, prefix="lgc_every_")
        self.every_decoder.hybridize(static_alloc=True)
        probe = mx.nd.zeros((1, 1, 16))
        with autograd.train_mode():
            code = self.encoder(probe)
            for d in self.decoders + [self.mean_decoder]:
                d(code, probe)
        for p in self.params():  # Kaiming-uniform weights, zero biases, from the generator
            if p.name.endswith("weight"):
                fan_in = int(np.prod(p.shape[1:])) if "conv1dtranspose" not in p.name else p.shape[0] * p.shape[2]
                bound = np.sqrt(6.0 / ((1 + SLOPE ** 2) * fan_in))
                p.set_data(mx.nd.array(rng.uniform(-bound, bound, p.shape)))

    def blocks(self):
        """The encoder, the decoders (position after the leader 0, 1, ..), the mean decoder."""
        return [self.encoder] + self.decoders + [self.mean_decoder]

    def params(self):
        """Every parameter, block by block (``blocks``), in a fixed order."""
        out = []
        for block in self.blocks():
            out += [block.collect_params()[name] for name in sorted(block.collect_params())]
        return out

    @staticmethod
    def flat(params):
        return np.concatenate([p.data().asnumpy().reshape(-1) for p in params]).astype(np.float32)

    @staticmethod
    def set_flat(params, vector):
        vector = np.asarray(vector, np.float32)
        want = sum(int(np.prod(p.shape)) for p in params)
        if vector.size != want:
            raise ValueError("lgc: %d autoencoder weights expected, got %d" % (want, vector.size))
        at = 0
        for p in params:
            n = int(np.prod(p.shape))
            p.set_data(mx.nd.array(vector[at:at + n].reshape(p.shape)))
            at += n

    def weight_count(self):
        return sum(int(np.prod(p.shape)) for p in self.params())

    def encode(self, vector):
        """The code (flat float32) of one vector (numpy, P values)."""
        with autograd.train_mode():
            return self.encoder(_mx.array(vector.reshape(1, 1, -1))).asnumpy().reshape(-1)

    def offset(self, worker, leader):
        """The decoder of ``worker`` at a step led by ``leader``: its position after the leader (with
        ``own_codes``, the one decoder)."""
        return 0 if self.own_codes else (worker - leader) % self.num_workers

    def decode(self, worker, leader, code, innovation, padded):
        """Worker ``worker``'s estimate (numpy, P values) from the code of ``leader``'s vector (with
        ``own_codes``: of its own) and the worker's innovation channel, clipped
        to [-1, 1]: the range of the leader's scaled vector (each value is divided by the leader's
        largest |value| of its tensor).  Unclipped, poor estimates can exceed the values they stand for
        by far, and error feedback that subtracts them grows the accumulators."""
        return self.decode_later(worker, leader, code, innovation, padded)()

    def decode_later(self, worker, leader, code, innovation, padded):
        """``decode`` with its networks queued on MXNet's engine: returns a function that waits for them and
        returns the estimate (so the caller can go on meanwhile)."""
        out = self._run(self.decoders[self.offset(worker, leader)], code, innovation, padded)
        return lambda: self._clipped(out).reshape(-1)

    def decode_every(self, leader, code, innovations, padded):
        """Every worker's estimate (numpy, W x P in rank order, clipped as ``decode``) from the code of
        ``leader``'s vector and each worker's innovation channel (rows of ``innovations``, in rank order),
        in one call of the networks."""
        innovations = np.roll(np.asarray(innovations).reshape(self.num_workers, -1), -leader, axis=0)
        out = self._clipped(self._run(self.every_decoder, code, innovations, padded)).reshape(self.num_workers, -1)
        return np.roll(out, leader, axis=0)

    def decode_own(self, codes, innovations, padded):
        """With ``own_codes``: every worker's estimate (numpy, W x P, clipped as ``decode``) from its own
        code and innovation channel (rows, rank order), in one call of the decoder."""
        codes = np.asarray(codes, np.float32).reshape(self.num_workers, -1, padded // 16)
        with autograd.train_mode():
            out = self.decoders[0](_mx.array(codes), _mx.array(np.asarray(innovations).reshape(-1, 1, padded)))
        return self._clipped(out).reshape(self.num_workers, -1)

    def decode_mean(self, code, innovation, padded):
        """The workers' mean vector (numpy, P values, clipped as ``decode``) from the mean of their codes
        and of their innovation channels."""
        return self._clipped(self._run(self.mean_decoder, code, innovation, padded)).reshape(-1)

    @staticmethod
    def _run(decoder, code, innovations, padded):
        """A decoder's output (queued) for a code and one innovation channel per row of ``innovations``."""
        with autograd.train_mode():
            return decoder(_mx.array(code.reshape(1, -1, padded // 16)), _mx.array(innovations.reshape(-1, 1, padded)))

    @staticmethod
    def _clipped(out):
        return np.clip(out.asnumpy(), -1, 1)


class Loss(gluon.HybridBlock):
    """The training loss (the module's docstring) of arrays (B, W, P) of vectors and innovation channels,
    each entry's workers in order of their position after its leader (the leader first), as one
    hybridized graph."""

    def __init__(self, autoencoder, code_weight, **kwargs):
        super().__init__(**kwargs)
        self.num_workers, self.code_weight = autoencoder.num_workers, code_weight
        self.own_codes = autoencoder.own_codes
        self.encoder, self.mean_decoder = autoencoder.encoder, autoencoder.mean_decoder  # (children: in the graph)
        for w, d in enumerate(autoencoder.decoders):
            setattr(self, "decoder%d" % w, d)

    def hybrid_forward(self, F, vectors, innovations):
        W = self.num_workers
        codes = self.encoder(F.expand_dims(F.reshape(vectors, shape=(-3, -2)), axis=1))  # (B * W, C, P / 16)
        by_entry = F.reshape(codes, shape=(-4, -1, W, -2))  # (B, W, C, P / 16)
        lead = F.squeeze(F.slice_axis(by_entry, axis=1, begin=0, end=1), axis=1)  # (B, C, P / 16)
        mean = self.mean_decoder(F.stop_gradient(F.mean(by_entry, axis=1)),
                                 F.mean(innovations, axis=1, keepdims=True))
        mean_error = F.mean(F.square(mean - F.mean(vectors, axis=1, keepdims=True)))
        if self.own_codes:  # every vector from its own code
            own = self.decoder0(codes, F.expand_dims(F.reshape(innovations, shape=(-3, -2)), axis=1))
            return F.mean(F.square(own - F.expand_dims(F.reshape(vectors, shape=(-3, -2)), axis=1))) + mean_error
        total = 0
        for w in range(W):
            estimate = getattr(self, "decoder%d" % w)(lead, F.slice_axis(innovations, axis=1, begin=w, end=w + 1))
            total = total + F.mean(F.square(estimate - F.slice_axis(vectors, axis=1, begin=w, end=w + 1)))
        agreement = F.mean(F.square(F.broadcast_sub(by_entry, F.expand_dims(lead, axis=1))))
        return total / W + mean_error + self.code_weight * agreement


class AutoencoderTrainer:
    """Adam on a replay buffer of (vectors of every worker, innovation channels, leader) per step."""

    BETA1, BETA2, EPSILON = 0.9, 0.999, 1e-8  # (Adam's usual constants, as gluon's)

    def __init__(self, autoencoder, lr, replay, code_weight, window=0, seed=0):
        self.ae = autoencoder
        self.lr, self.replay, self.code_weight = lr, replay, code_weight
        self.window, self.seed = window, seed
        self.buffer = []  # [(vectors W x P, innovations W x P, leader)]
        self._by_position = []  # the buffer's (vectors, innovations), each entry's rows from its leader on
        self.params = autoencoder.params()
        self.moments = [(mx.nd.zeros(p.shape), mx.nd.zeros(p.shape)) for p in self.params]  # Adam's mean, var
        # the update's arrays, MULTI_UPDATE_MAX weights a call (a weight's arrays stay: new weights are copied in)
        self._update_lists = [([p.data() for p in self.params[at:at + MULTI_UPDATE_MAX]],
                               [p.grad() for p in self.params[at:at + MULTI_UPDATE_MAX]],
                               [m for m, _ in self.moments[at:at + MULTI_UPDATE_MAX]],
                               [v for _, v in self.moments[at:at + MULTI_UPDATE_MAX]])
                              for at in range(0, len(self.params), MULTI_UPDATE_MAX)]
        self.lossfn = Loss(autoencoder, code_weight)
        self.lossfn.hybridize(static_alloc=True, static_shape=True)
        self.steps = 0

    def add(self, vectors, innovations, leader):
        """Adds a step's sample to the replay buffer; refuses (returns False for) one holding a non-finite
        value, which would make every later training step, and so every later estimate, NaN."""
        vectors, innovations = np.asarray(vectors, np.float32), np.asarray(innovations, np.float32)
        if not (np.isfinite(vectors).all() and np.isfinite(innovations).all()):
            return False
        self.buffer.append((vectors, innovations, int(leader)))
        self._by_position.append((np.roll(vectors, -int(leader), axis=0), np.roll(innovations, -int(leader), axis=0)))
        del self.buffer[:-self.replay], self._by_position[:-self.replay]
        return True

    def _adam(self):
        """One Adam step of every weight from its gradient: one multi-tensor update (bias-corrected
        through the rate, as gluon's Adam)."""
        t = self.steps + 1
        lr = self.lr * np.sqrt(1 - self.BETA2 ** t) / (1 - self.BETA1 ** t)
        for weights, grads, means, variances in self._update_lists:
            n = len(weights)
            mx.nd.contrib.multi_adamw_update(weights, grads, means, variances, 1.0, [lr] * n, [0.0] * n, [1.0] * n,
                                             out=weights, beta1=self.BETA1, beta2=self.BETA2, epsilon=self.EPSILON)

    def train_step(self):
        """One Adam step on every entry of the buffer (windows of ``window`` values), queued on MXNet's
        engine: returns at once with the loss before the step, an NDArray scalar computed meanwhile (read
        it only when needed: reading waits).  Whatever reads the weights afterwards (a code, a decode, a
        checkpoint) waits for the step through the engine's dependencies."""
        vectors, innovations = (np.stack(x) for x in zip(*self._by_position))
        P = vectors.shape[2]
        if 0 < self.window < P:
            rng = np.random.default_rng([self.seed, self.steps])
            starts = 16 * rng.integers(0, (P - self.window) // 16 + 1, len(self.buffer))
            vectors = np.stack([v[:, s:s + self.window] for v, s in zip(vectors, starts)])
            innovations = np.stack([v[:, s:s + self.window] for v, s in zip(innovations, starts)])
        with autograd.record():
            loss = self.lossfn(_mx.array(vectors), _mx.array(innovations))
        loss.backward()
        self._adam()
        self.steps += 1
        return loss

    def state(self):
        """What a checkpoint needs: weights, Adam's moments (flat, in ``params`` order), the buffer, the step
        count (Adam's bias correction)."""
        return {"weights": Autoencoder.flat(self.params),
                "adam": [np.concatenate([m[i].asnumpy().reshape(-1) for m in self.moments]) for i in (0, 1)],
                "steps": self.steps, "buffer": self.buffer}

    def load_state(self, state):
        Autoencoder.set_flat(self.params, state["weights"])
        at = 0
        for mean, var in self.moments:
            n = mean.size
            mean[:] = state["adam"][0][at:at + n].reshape(mean.shape)
            var[:] = state["adam"][1][at:at + n].reshape(var.shape)
            at += n
        self.steps = state["steps"]
        self.buffer, self._by_position = [], []
        for vectors, innovations, leader in state["buffer"]:
            self.add(vectors, innovations, leader)
