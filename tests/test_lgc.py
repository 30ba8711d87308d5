"""Learned gradient compression's pieces in one process: the options, the wire format byte for byte
against a reference written here, the autoencoder on synthetic gradients."""
import mxnet as mx
import numpy as np
import pytest

import dgc_reference

from mxnet_gc import _mx
from mxnet_gc.kvstore.compression import Compression
from mxnet_gc.lgc import vectors
from mxnet_gc.lgc.autoencoder import Autoencoder, AutoencoderTrainer
from mxnet_gc.lgc.options import LGCOptions
from mxnet_gc.lgc.wire import MAGIC, CorruptMessage, WireFormat


# ---- options ----

@pytest.mark.parametrize("params, field", [
    ({"densty": 0.01}, "densty"), ({"density": 0}, "density"), ({"density": 1.0}, "density"),
    ({"density": float("nan")}, "density"), ({"density": 1e-3, "innovation_density": 1e-2}, "innovation_density"),
    ({"ae_steps": 0}, "ae_steps"), ({"leader": -1}, "leader"), ({"error_feedback": "keep"}, "error_feedback"),
    ({"encoder_channels": [8, 16]}, "encoder_channels"), ({"dense_patterns": "conv*"}, "dense_patterns"),
    ({"ramp_steps": 2, "ramp_stages": 4}, "ramp_steps"), ({"momentum": 1.0}, "momentum"),
    ({"autoencoder": "no"}, "autoencoder"), ({"autoencoder": False, "ramp_steps": 0}, "ramp_steps"),
    ({"order": "random"}, "order"), ({"fine_tune_every": -1}, "fine_tune_every"),
    ({"fine_tune_every": 5, "autoencoder": False}, "fine_tune_every"), ({"ae_window": 100}, "ae_window"),
    ({"codes": "every"}, "codes"), ({"index": "vote"}, "index"), ({"signs": 1}, "signs"), ({"signs": True}, "signs"),
])
def test_bad_options_name_the_field(params, field):
    with pytest.raises(ValueError, match=repr(field)):
        LGCOptions(params)
    with pytest.raises(ValueError, match=repr(field)):  # the store's entry point says the same
        Compression(dict(params, type="lgc"))


def test_phases_are_the_schedule_of_the_options():
    options = LGCOptions({"density": 1e-3, "dense_steps": 10, "ramp_steps": 9, "ramp_stages": 3, "ae_steps": 5})
    phases = [(p.name, p.steps) for p in options.phases()]
    assert phases == [("dense", 10), ("sparse-1", 3), ("sparse-2", 3), ("sparse-3", 3), ("train", 5), ("lgc", None)]
    np.testing.assert_allclose(options.ramp_densities(), [0.25, 0.25 * (1e-3 / 0.25) ** 0.5, 1e-3])
    assert [options.leader_at(s, 3) for s in range(5)] == [0, 1, 2, 0, 1]
    without = LGCOptions({"dense_steps": 10, "ramp_steps": 9, "ramp_stages": 3, "autoencoder": False})
    assert [(p.name, p.steps) for p in without.phases()] == [("dense", 10), ("sparse-1", 3), ("sparse-2", 3),
                                                             ("sparse-3", None)]
    assert LGCOptions({"leader": 0}).leader_at(7, 3) == 0
    # fine-tuning: the last step of every 3 of the lgc phase (from step 10 + 9 + 5 = 24) trains
    tuned = LGCOptions({"dense_steps": 10, "ramp_steps": 9, "ramp_stages": 3, "ae_steps": 5, "fine_tune_every": 3})
    assert [s for s in range(20, 33) if tuned.tunes(s)] == [26, 29, 32]
    assert tuned.trains("train", 20) and tuned.trains("lgc", 26) and not tuned.trains("lgc", 25)
    assert not any(options.tunes(s) for s in range(100))


def test_one_step_clock_holds_every_phase():
    """A store's clock is its compression's phases (the warm-up's, with 'auto' levels fitted in its last
    steps, or LGC's); the trainer's schedule with 'lgc' is LGC's phases."""
    from mxnet import gluon
    import mxnet_gc
    names = lambda phases: [(p.name, p.steps, p.sends) for p in phases]  # noqa: E731
    assert names(Compression({"type": "4bit", "warmup_steps": 30}).phases()) == [
        ("dense", 10, "dense"), ("fit_levels", 20, "dense"), ("compressed", None, "compressed")]
    assert names(Compression({"type": "4bit", "thresholds": "medium", "warmup_steps": 5}).phases()) == [
        ("dense", 5, "dense"), ("compressed", None, "compressed")]
    assert names(Compression({"type": "none"}).phases()) == [("compressed", None, "compressed")]
    params = {"type": "lgc", "dense_steps": 4, "ramp_steps": 2, "ramp_stages": 2, "ae_steps": 3}
    assert Compression(params).phases() == LGCOptions(params).phases()
    net = gluon.nn.Dense(2)
    net.initialize()
    trainer = mxnet_gc.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=None,
                                     compression_params=params, update_on_kvstore=False)
    assert trainer.schedule.phases == tuple(LGCOptions(params).phases())


def test_coded_keys_follow_dgc_rule_or_the_patterns():
    keys, shapes = [0, 1, 2, 3, 4], [(8, 4), (8,), (16, 8), (16, 16, 3, 3), (10, 16)]
    assert LGCOptions({}).coded_keys(keys, shapes, {}) == [2, 3]  # not 1-D, not the first or last
    names = {0: "conv0_weight", 2: "conv1_weight", 3: "conv2_weight", 4: "dense0_weight"}
    assert LGCOptions({"dense_patterns": ["dense*", "conv0*"]}).coded_keys(keys, shapes, names) == [2, 3]


# ---- the wire format, against a bit-by-bit reference ----

def reference_pack(values, widths):
    """Least significant bit first, value after value, in 32-bit words (Python integers)."""
    stream, at = 0, 0
    for v, w in zip(values, widths):
        assert 0 <= v < 2 ** w
        stream |= int(v) << at
        at += w
    words = (at + 31) // 32
    return np.array([(stream >> (32 * i)) & 0xFFFFFFFF for i in range(words)], np.uint32)


def as_bytes(*parts):
    return b"".join(np.asarray(p).astype(np.uint32 if np.asarray(p).dtype.kind in "iu" else np.float32).tobytes()
                    for p in parts)


@pytest.fixture
def fmt():
    # three tensors: 1000 values (10 bits per index), 37 (6 bits), 5 (3 bits); 2 workers
    return WireFormat([1000, 37, 5], density=0.02, innovation_density=0.002, num_workers=2, latent_channels=4)


def test_sizes(fmt):
    assert fmt.k == [20, 1, 1] and fmt.ki == [2, 1, 1] and fmt.bits == [10, 6, 3]
    assert fmt.K == 22 and fmt.padded == 32 and fmt.code_words == 8
    assert fmt.index_words == (20 * 10 + 6 + 3 + 31) // 32 == 7


def test_messages_byte_for_byte(fmt):
    rng = np.random.default_rng(3)
    lead = [rng.choice(1000, 20, replace=False), np.array([36]), np.array([4])]
    own = [np.array([999, 0]), np.array([5]), np.array([2])]
    values = [np.array([1.5, -2.0], np.float32), np.array([0.25], np.float32), np.array([-8.0], np.float32)]
    scales = np.array([3.0, 0.5, 9.0], np.float32)
    code = rng.standard_normal(8).astype(np.float32)
    lead_bits = reference_pack(np.concatenate(lead), [10] * 20 + [6, 3])
    own_bits = reference_pack(np.concatenate(own), [10, 10, 6, 3])
    header = lambda kind, step, rank: np.array([MAGIC[kind], step, rank], np.uint32)  # noqa: E731
    assert fmt.index_message(7, 1, scales, lead).tobytes() == as_bytes(header("INDEX", 7, 1), scales, lead_bits)
    assert fmt.lead_message(2 ** 32 + 5, 1, scales, lead, code).tobytes() == \
        as_bytes(header("LEAD", 5, 1), scales, lead_bits, code)
    innov = fmt.innov_message(7, 0, own, values)
    assert innov.tobytes() == as_bytes(header("INNOV", 7, 0), own_bits, np.concatenate(values))
    vector = rng.standard_normal(32).astype(np.float32)
    assert fmt.innov_message(7, 0, own, values, vector).tobytes() == \
        as_bytes(header("VECTOR", 7, 0), own_bits, np.concatenate(values), vector)
    coded = fmt.innov_message(7, 1, own, values, code=code, scales=scales[::-1])
    assert coded.tobytes() == as_bytes(header("CODED", 7, 1), scales[::-1], own_bits, np.concatenate(values), code)
    fields = fmt.read("CODED", coded, step=7)
    np.testing.assert_array_equal(fields["code"], code)
    np.testing.assert_array_equal(fields["scales"], scales[::-1])
    assert [list(x) for x in fields["innov_values"]] == [list(x) for x in values]
    sums = rng.standard_normal(22).astype(np.float32)
    extras = [[v * 2 for v in values], values]
    result = fmt.result_message(7, 1, scales, lead, sums, [own, own], extras, code)
    both = reference_pack(np.concatenate(own + own), [10, 10, 6, 3] * 2)
    assert result.tobytes() == as_bytes(header("RESULT", 7, 1), scales, lead_bits, sums, both,
                                        np.concatenate(extras[0] + extras[1]), code)
    # and back
    fields = fmt.read("RESULT", result, step=7)
    assert fields["rank"] == 1
    for a, b in zip(fields["indices"], lead):
        np.testing.assert_array_equal(a, b)
    for w in range(2):
        for a, b in zip(fields["innov_indices"][w], own):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(fields["sums"], sums)
    np.testing.assert_array_equal(fields["code"], code)
    np.testing.assert_array_equal(fields["scales"], scales)
    assert [len(x) for x in fmt.read("INNOV", innov)["innov_values"]] == [2, 1, 1]


def test_coded_messages_carry_the_vectors_signs_a_bit_each():
    signed = WireFormat([1000, 37, 5], density=0.02, innovation_density=0.002, num_workers=2, latent_channels=4,
                        signs=True)
    assert signed.words["CODED"] == WireFormat([1000, 37, 5], 0.02, 0.002, 2, 4).words["CODED"] + 1  # 32 bits
    own, values = [np.array([999, 0]), np.array([5]), np.array([2])], [np.ones(2), np.ones(1), np.ones(1)]
    signs = (np.random.default_rng(5).standard_normal(32) > 0).astype(np.uint8)
    code, scales = np.arange(8, dtype=np.float32), np.ones(3, np.float32)
    coded = signed.innov_message(7, 1, own, values, code=code, scales=scales, signs=signs)
    assert coded.view(np.uint32)[-1] == int("".join(map(str, signs[::-1])), 2)  # least significant bit first
    np.testing.assert_array_equal(signed.read("CODED", coded, step=7)["signs"], signs)
    np.testing.assert_array_equal(signed.read("CODED", coded, step=7)["code"], code)


def test_corrupt_messages_are_refused(fmt):
    lead = [np.arange(20), np.array([36]), np.array([4])]
    good = fmt.index_message(3, 0, [1, 1, 1], lead)
    with pytest.raises(CorruptMessage, match="words"):
        fmt.read("INDEX", good[:-1])
    with pytest.raises(CorruptMessage, match="not a LEAD"):
        fmt.read("LEAD", np.concatenate([good, np.zeros(fmt.code_words, np.float32)]))
    with pytest.raises(CorruptMessage, match="step 3 arrived in step 4"):
        fmt.read("INDEX", good, step=4)
    bad = good.copy()
    bad.view(np.uint32)[-1] = 0xFFFFFFFF  # the last tensor's index: 7 > its 5 values
    with pytest.raises(CorruptMessage, match="out of tensor"):
        fmt.read("INDEX", bad)
    with pytest.raises(CorruptMessage, match="scales"):
        fmt.read("INDEX", fmt.index_message(3, 0, [1, 0, 1], lead))
    with pytest.raises(CorruptMessage, match="scales"):
        fmt.read("INDEX", fmt.index_message(3, 0, [1, np.nan, 1], lead))


@pytest.mark.parametrize("k", [0, 1, 2, 64, 65, 300, 4000])
def test_top_indices_are_numpys_stable_order(k):
    """vectors.top (C++: candidates above a rising floor, a buffer cut to the best k when full) lists numpy's
    stable argsort of -|v|: largest first, ties to the lower index (many equal magnitudes, both signs),
    NaN last; also where every value is a new candidate (magnitudes rising along the array: the buffer
    fills again and again) or none after the first (falling)."""
    rng = np.random.default_rng(k)
    rising = (np.arange(4000) * np.where(np.arange(4000) % 2, -1, 1)).astype(np.float32)
    for v in [rng.standard_normal(4000).astype(np.float32),
              rng.integers(-3, 4, 4000).astype(np.float32),  # (few magnitudes: long runs of ties)
              np.where(rng.random(4000) < 0.3, np.nan, rng.standard_normal(4000)).astype(np.float32),
              rising, rising[::-1].copy(), np.repeat(rising[::40], 40)]:
        want = np.argsort(-np.abs(v), kind="stable")[:k]
        np.testing.assert_array_equal(vectors.top(v, k), want)
    with pytest.raises(ValueError, match="not within 0..4000"):
        vectors.top(v, 4001)


@pytest.mark.parametrize("n, k_lead, k_innov, momentum, threads", [
    (1000, 100, 3, 0.9, 0), (50, 50, 50, 0.0, 0), (100000, 100, 64, 0.9, 0), (100000, 65, 1, 0.5, 0),
    (300, 0, 2, 0.9, 0), (300001, 300, 70, 0.9, 3), (300001, 5000, 1, 0.0, 2)])
def test_one_accumulation_pass_is_numpys_steps(n, k_lead, k_innov, momentum, threads):
    """vectors.accumulate (one C++ pass) equals numpy's DGC step (dgc_reference: u = m u + g; v += u, or
    v += g; v and u keep their values where the new v is not finite: NaN and inf gradients, which are
    counted, and overflows), numpy's stable top-k of |v| and its largest finite |v|, bit for bit; also
    split over ``threads`` (0: the default) whose selections are merged."""
    import mxnet_gc

    mxnet_gc.set_num_threads(threads)
    try:
        _check_accumulation(n, k_lead, k_innov, momentum)
    finally:
        mxnet_gc.set_num_threads(0)


def _check_accumulation(n, k_lead, k_innov, momentum):
    rng = np.random.default_rng(n + k_lead)
    v, u, g = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    g[::17], g[5] = np.nan, np.inf
    v[7], g[7] = 3e38, 3e38  # (an overflow: v and u keep their values)
    bad = ~np.isfinite(g)
    want_u, want_v = dgc_reference.step(g, u, v, momentum)
    assert want_v[7] == v[7] and want_u[7] == u[7]
    lead, innov, scale, nonfinite = vectors.accumulate(v, u if momentum else None, g, momentum, k_lead, k_innov)
    assert nonfinite == np.count_nonzero(bad)
    np.testing.assert_array_equal(v, want_v)
    np.testing.assert_array_equal(u, want_u)
    np.testing.assert_array_equal(lead, np.argsort(-np.abs(want_v), kind="stable")[:k_lead])
    np.testing.assert_array_equal(innov, np.argsort(-np.abs(want_v), kind="stable")[:k_innov])
    assert scale == np.max(np.abs(want_v))
    assert vectors.accumulate(np.zeros(4, np.float32), None, np.zeros(4, np.float32), 0, 1, 1)[2] == 1.0
    with pytest.raises(ValueError, match="not within"):
        vectors.accumulate(v, None, g, 0, n + 1, 1)


def test_dense_velocities_take_the_kernels_dgc_step():
    """LGC's dense velocities (lgc/velocities.py) step as the C++ kernels' DGC momentum does (dgc_reference
    with no accumulator): a non-finite gradient value or an overflow leaves the velocity as it was, and the
    non-finite values are counted."""
    from mxnet_gc.lgc.velocities import DenseVelocities

    rng = np.random.default_rng(3)
    velocities, want = DenseVelocities(0.9), np.zeros(1001, np.float32)
    for step in range(3):
        g = rng.standard_normal(1001).astype(np.float32)
        g[step::50], g[10] = np.nan, [3e38, 3e38, -np.inf][step]
        u = velocities.step("w", g)
        want = dgc_reference.velocity_step(g, want, 0.9)
        np.testing.assert_array_equal(u, want)
        assert velocities.nonfinite["w"] == np.count_nonzero(~np.isfinite(g))
    assert np.isfinite(want).all() and want[10] == np.float32(3e38)  # (kept at steps 1 and 2: overflow, -inf)


def test_clip_takes_no_more_than_each_value_and_nothing_of_the_other_sign():
    """Error feedback 'clip': an applied value is taken whole when it lies between 0 and the accumulator's
    value, cut to the value when it overshoots, and not taken when its sign differs."""
    values = np.array([2.0, 2.0, 2.0, -3.0, -3.0, 0.0], np.float32)
    applied = np.array([1.5, 5.0, -1.0, -1.0, 4.0, 0.7], np.float32)
    np.testing.assert_array_equal(vectors.clamped(applied, values), [1.5, 2.0, 0.0, -1.0, 0.0, 0.0])


def test_sparse_update_is_the_dense_sum():
    """The update's nonzero coordinates and values: the sums at the leader's indices plus each worker's
    extras, duplicates added, as a dense numpy sum."""
    fmt = WireFormat([50, 40], 0.06, 0.06, 2, 4)
    lead = [np.array([7, 3, 20]), np.array([1, 9])]
    sums = np.arange(1, 6, dtype=np.float32)
    own = [[np.array([3, 11, 30]), np.array([9, 2])], [np.array([11, 40, 5]), np.array([0, 2])]]
    extras = [[np.array([0, 0.5, 0.25], np.float32), np.array([0, 2], np.float32)],
              [np.array([1, 3, 4], np.float32), np.array([8, 16], np.float32)]]
    for c, (at, values) in enumerate(vectors.sparse_update(fmt, lead, sums, own, extras)):
        dense = np.zeros(fmt.sizes[c], np.float32)
        dense[lead[c]] = sums[[0, 3][c]:[3, 5][c]]
        for w in range(2):
            np.add.at(dense, own[w][c], extras[w][c])
        assert np.all(np.diff(at) > 0)
        got = np.zeros(fmt.sizes[c], np.float32)
        got[at] = values
        np.testing.assert_array_equal(got, dense)


def test_innovation_positions_in_the_vector():
    # tensor 0's leader indices by |value| (unsorted), tensor 1's ascending; segments start at 0 and 3
    fmt = WireFormat([50, 40], 0.06, 0.06, 2, 4)
    assert fmt.k == [3, 2]
    lead = [np.array([30, 4, 17]), np.array([5, 39])]
    own = [np.array([17, 31, 4]), np.array([0, 39])]
    got = vectors.innovation_positions(fmt, lead, own)
    assert [list(p) for p in got] == [[2, -1, 1], [-1, 4]]


# ---- the autoencoder ----

def synthetic(rng, correlated, workers=2, length=64):
    """Smooth vectors of 4 components: the same coefficients on every worker plus a little noise of its
    own (correlated), or coefficients of each worker's own; each scaled to a largest |value| of 1, as
    the coded vectors are."""
    t = np.linspace(0, 1, length)
    basis = np.stack([np.cos(np.pi * j * t) for j in range(4)])
    shared = rng.standard_normal(4)
    rows = [(shared if correlated else rng.standard_normal(4)) @ basis + 0.05 * rng.standard_normal(length)
            for _ in range(workers)]
    return np.array([r / np.max(np.abs(r)) for r in rows], np.float32)


def reconstruction_error(correlated, steps=200, length=64, window=0):
    rng = np.random.default_rng(0)
    ae = Autoencoder(2, [8, 16, 16, 8], 4, seed=0)
    trainer = AutoencoderTrainer(ae, lr=3e-3, replay=8, code_weight=0.1, window=window)
    for s in range(steps):
        v = synthetic(rng, correlated, length=length)
        trainer.add(v, np.zeros_like(v), s % 2)
        trainer.train_step()
    errors = []
    for s in range(40):
        v = synthetic(rng, correlated, length=length)
        code = ae.encode(v[s % 2])
        for w in range(2):
            est = ae.decode(w, s % 2, code, np.zeros(length, np.float32), length)
            errors.append(np.sum((est - v[w]) ** 2) / np.sum(v[w] ** 2))
    return float(np.mean(errors))


def test_autoencoder_learns_what_workers_share():
    # each worker's vector decoded from the leader's code: 2.6% relative error when the workers share their
    # components (bound 10%); nothing to learn when they do not (89%)
    correlated = reconstruction_error(True)
    uncorrelated = reconstruction_error(False)
    assert correlated < 0.1
    assert uncorrelated > 0.5 and uncorrelated > 5 * correlated


def test_training_on_windows_learns_the_whole_vector():
    # trained on windows of 64 of 256-value vectors, the autoencoder codes whole vectors: 0.6% error (bound
    # 10%), and the windows come from the seed and the step: two trainers end with the same weights
    assert reconstruction_error(True, length=256, window=64) < 0.1
    weights = []
    for _ in range(2):
        ae = Autoencoder(2, [4, 4, 4, 4], 4, seed=0)
        trainer = AutoencoderTrainer(ae, lr=1e-2, replay=2, code_weight=0.1, window=32, seed=3)
        rng = np.random.default_rng(1)
        for s in range(3):
            v = rng.uniform(-1, 1, (2, 128)).astype(np.float32)
            trainer.add(v, np.zeros_like(v), 0)
            trainer.train_step()
        weights.append(Autoencoder.flat(ae.params()))
    np.testing.assert_array_equal(weights[0], weights[1])


def imperative_loss(ae, vectors, innovations, leaders, code_weight):
    """The training loss operator by operator (the reference of the hybridized ``Loss``)."""
    B, W, P = vectors.shape
    codes = ae.encoder(vectors.reshape((B * W, 1, P))).reshape((B, W, -1, P // 16))
    lead = mx.nd.stack(*[codes[b, int(leaders[b])] for b in range(B)])
    total = 0
    for w in range(W):
        # decoder d estimates worker (leader + d) mod W of each entry
        rows = [(int(leaders[b]) + w) % W for b in range(B)]
        estimate = ae.decoders[w](lead, mx.nd.stack(*[innovations[b, r:r + 1, :] for b, r in enumerate(rows)]))
        target = mx.nd.stack(*[vectors[b, r, :] for b, r in enumerate(rows)])
        total = total + mx.nd.mean(mx.nd.square(estimate.reshape((B, P)) - target))
    mean = ae.mean_decoder(mx.nd.mean(codes, axis=1).detach(), mx.nd.mean(innovations, axis=1, keepdims=True))
    mean_error = mx.nd.mean(mx.nd.square(mean.reshape((B, P)) - mx.nd.mean(vectors, axis=1)))
    agreement = mx.nd.mean(mx.nd.square(codes - lead.expand_dims(1)))
    return total / W + mean_error + code_weight * agreement


def test_a_training_step_is_the_loss_operator_by_operator_and_gluons_adam():
    """The hybridized loss and the one multi-tensor Adam update give the loss written operator by operator
    and gluon's Adam, step after step (the bias correction included)."""
    rng = np.random.default_rng(5)
    ours, theirs = Autoencoder(3, [4, 4, 4, 4], 4, seed=2), Autoencoder(3, [4, 4, 4, 4], 4, seed=2)
    trainer = AutoencoderTrainer(ours, lr=1e-2, replay=2, code_weight=0.1)
    reference = mx.gluon.Trainer(theirs.params(), "adam", {"learning_rate": 1e-2}, kvstore=None)
    for step in range(4):
        v = rng.uniform(-1, 1, (3, 64)).astype(np.float32)
        trainer.add(v, v * (rng.random((3, 64)) < 0.1), step % 3)
        vectors, innovations = (mx.nd.array(np.stack([b[i] for b in trainer.buffer])) for i in (0, 1))
        with mx.autograd.record(), mx.autograd.train_mode():
            want = imperative_loss(theirs, vectors, innovations, [b[2] for b in trainer.buffer], 0.1)
        want.backward()
        reference.step(1)
        assert trainer.train_step().asscalar() == pytest.approx(float(want.asscalar()), rel=1e-5)
        np.testing.assert_allclose(Autoencoder.flat(ours.params()), Autoencoder.flat(theirs.params()),
                                   rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("sizes", [[37], [1000, 3], [5000, 17, 9]])
def test_codes_of_any_length(sizes):
    fmt = WireFormat(sizes, 0.1, 0.01, 3, 4)
    ae = Autoencoder(3, [4, 4, 4, 4], 4, seed=1)
    code = ae.encode(np.ones(fmt.padded, np.float32))
    assert code.shape == (fmt.code_words,)
    assert ae.decode(2, 0, code, np.zeros(fmt.padded, np.float32), fmt.padded).shape == (fmt.padded,)


def test_every_decoder_in_one_call_is_each_decoder_alone():
    """A server's one call of every worker's decoder (``decode_every``) and a worker's queued decode
    (``decode_later``) give each decoder's own ``decode``, whoever leads; worker w's decoder is the one at
    its position after the leader (the leader's own: decoder 0)."""
    ae = Autoencoder(3, [8, 16, 16, 8], 4, seed=2)
    rng = np.random.default_rng(2)
    code = ae.encode(rng.uniform(-1, 1, 64).astype(np.float32))
    channels = rng.uniform(-1, 1, (3, 64)).astype(np.float32)
    for leader in range(3):
        every = ae.decode_every(leader, code, channels, 64)
        for w in range(3):
            alone = ae.decode(w, leader, code, channels[w], 64)
            np.testing.assert_allclose(every[w], alone, rtol=1e-6, atol=1e-7)
            np.testing.assert_array_equal(ae.decode_later(w, leader, code, channels[w], 64)(), alone)
            by_position = ae.decode((w - leader) % 3, 0, code, channels[w], 64)
            np.testing.assert_array_equal(alone, by_position)
    assert not np.allclose(ae.decode(0, 0, code, channels[0], 64), ae.decode(1, 0, code, channels[0], 64))


def test_arrays_written_through_their_memory_are_mxnets_copies():
    """The per-step inputs of the autoencoder and LGC's messages (``_mx.array``, ``_mx.write``) hold what
    ``mx.nd.array`` and a slice assignment would, and engine operations queued next read those values."""
    values = np.random.default_rng(3).standard_normal((3, 5)).astype(np.float32)
    made = _mx.array(values)
    assert made.shape == (3, 5) and made.dtype == np.float32
    np.testing.assert_array_equal(made.asnumpy(), mx.nd.array(values).asnumpy())
    np.testing.assert_array_equal((made * 2).asnumpy(), values * 2)
    assert _mx.array(np.zeros((0, 4), np.float32)).shape == (0, 4)
    target = mx.nd.zeros(15)
    pending = target + 1  # (an engine operation that read the old values)
    pending.wait_to_read()
    _mx.write(target, values)
    np.testing.assert_array_equal(target.asnumpy(), values.reshape(-1))
    np.testing.assert_array_equal(pending.asnumpy(), np.ones(15, np.float32))


def test_weights_round_trip_and_start_from_the_seed():
    a, b = Autoencoder(2, [8, 16, 16, 8], 4, seed=5), Autoencoder(2, [8, 16, 16, 8], 4, seed=5)
    np.testing.assert_array_equal(Autoencoder.flat(a.params()), Autoencoder.flat(b.params()))
    other = Autoencoder(2, [8, 16, 16, 8], 4, seed=6)
    Autoencoder.set_flat(other.params(), Autoencoder.flat(a.params()))
    x = np.linspace(-1, 1, 32).astype(np.float32)
    np.testing.assert_array_equal(other.encode(x), a.encode(x))
    with pytest.raises(ValueError, match="weights expected"):
        Autoencoder.set_flat(other.params(), np.zeros(3, np.float32))


def test_a_worker_records_the_error_of_what_was_applied_on_its_behalf():
    """Rank 0's report (lgc_rounds.end_step) reads these: the relative squared error of the estimate with the
    worker's innovation coordinates exact, whether it led, and the error with the best scale."""
    from mxnet_gc.lgc.coder import GroupCoder
    from mxnet_gc.schedule import LGC
    fmt = WireFormat([1000, 50], 0.05, 0.01, 2, 4)
    coder = GroupCoder(fmt, LGCOptions({"density": 0.05, "innovation_density": 0.01}), rank=0)
    rng = np.random.default_rng(4)
    coder.accumulate([rng.standard_normal(1000).astype(np.float32), rng.standard_normal(50).astype(np.float32)],
                     lead=True)
    own = fmt.read("INNOV", coder.innov_message(0))["innov_indices"]
    others = [np.setdiff1d(np.arange(n), o) for n, o in zip(fmt.sizes, own)]  # two of its own among the leader's:
    indices = [np.sort(np.concatenate([own[0][:2], rng.choice(others[0], fmt.k[0] - 2, replace=False)])),
               np.sort(rng.choice(others[1], fmt.k[1], replace=False))]
    truth = np.concatenate([coder.v[c][indices[c]] for c in range(2)])
    result = {"indices": indices, "sums": np.zeros(fmt.K, np.float32), "innov_indices": [own, own],
              "innov_values": [[np.zeros(k, np.float32) for k in fmt.ki]] * 2, "rank": 1}
    estimate = rng.standard_normal(fmt.padded).astype(np.float32)
    coder.finish(LGC, result, estimate=estimate)
    applied = estimate[:fmt.K].astype(np.float64)
    for c in range(2):
        for i in own[c]:
            hit = np.flatnonzero(indices[c] == i)
            if hit.size:
                applied[(0 if c == 0 else fmt.k[0]) + hit[0]] = truth[(0 if c == 0 else fmt.k[0]) + hit[0]]
    assert np.sum(applied != estimate[:fmt.K]) == 2
    error, led, best = coder.errors[0]
    assert error == pytest.approx(np.sum((applied - truth) ** 2) / np.sum(truth ** 2), rel=1e-6)  # (float32 sums)
    cos = applied @ truth / np.linalg.norm(applied) / np.linalg.norm(truth)
    assert not led and best == pytest.approx(1 - cos ** 2, rel=1e-6) and best < error


def test_a_saved_autoencoder_is_refused_by_another_decoder_layout(tmp_path):
    """A state saved with the other `codes` or without the `signs` its decoders now read would load weights
    read the wrong way: refused, naming the difference."""
    from mxnet_gc.lgc.combiner import Combiner
    fmt = WireFormat([1000, 50], 0.05, 0.01, 2, 4)
    leader, own = (Combiner(fmt, LGCOptions({"density": 0.05, "innovation_density": 0.01, "codes": c}), overlap=False)
                   for c in ("leader", "own"))
    path = str(tmp_path / "state")
    leader.save(path, 7)
    leader.load(path, 7)  # its own state loads
    with pytest.raises(ValueError, match="decoders by position after the leader there, own codes here"):
        own.load(path, 7)
    signs = Combiner(fmt, LGCOptions({"density": 0.05, "innovation_density": 0.01, "codes": "own", "signs": True}),
                     overlap=False)
    own.save(path, 7)
    with pytest.raises(ValueError, match="signs False there, True here"):  # its decoders never saw the signs
        signs.load(path, 7)


# ---- index 'union' ----

def union_by_turns(candidates, k, first):
    """Every worker's candidates taken in turns from rank ``first`` (each one's best, then each one's
    second, ...), the first k distinct, completed by the lowest indices not among them, ascending: written
    as a loop."""
    W, chosen = len(candidates), []
    for j in range(max(len(c) for c in candidates)):
        for t in range(W):
            row = candidates[(first + t) % W]
            if j < len(row) and len(chosen) < k and row[j] not in chosen:
                chosen.append(row[j])
    free = 0
    while len(chosen) < k:
        if free not in chosen:
            chosen.append(free)
        free += 1
    return sorted(chosen)


@pytest.mark.parametrize("first", [0, 1, 2])
@pytest.mark.parametrize("shared", [0, 4])
def test_union_draws_from_every_workers_candidates_in_turns(first, shared):
    fmt = WireFormat([1000, 300], 0.01, 0.001, 3, 4)  # k = 10 and 3; each worker's share 4 and 1
    assert fmt.kc == [4, 1]
    rng = np.random.default_rng(first)
    candidates = [[20 + rng.choice(40, kc, replace=False) for kc in fmt.kc] for _ in range(3)]
    candidates[1][0][:shared] = candidates[0][0][:shared]  # shared candidates are taken once, the set completed
    got = vectors.union(fmt, candidates, first)
    for c, k in enumerate(fmt.k):
        assert list(got[c]) == union_by_turns([cand[c] for cand in candidates], k, first)
        assert got[c].size == k and np.all(np.diff(got[c]) > 0)
    assert set(candidates[first][0]) < set(got[0])  # the leader's share and others'
    assert (min(got[0]) < 20) == bool(shared)  # completed from the lowest indices only when they overlap


def test_candidates_that_repeat_an_index_are_corrupt():
    fmt = WireFormat([1000], 0.01, 0.001, 2, 4)
    good, bad = [np.arange(5)], [np.array([7, 8, 7, 9, 10])]
    with pytest.raises(CorruptMessage, match="worker 1's candidates for tensor 0 repeat an index"):
        vectors.union(fmt, [good, bad], 0)


def test_candidates_are_an_index_message_of_their_own_kind():
    fmt = WireFormat([1000, 300], 0.01, 0.001, 2, 4)
    indices = [np.arange(5)[::-1] * 7, np.array([299, 0])]  # a worker's share: ceil(k / 2) of k = 10, 3
    words = fmt.index_message(3, 1, [0.5, 2.0], indices, kind="CAND")
    assert words.view(np.uint32)[0] == MAGIC["CAND"] and words.size == fmt.words["CAND"] < fmt.words["INDEX"]
    fields = fmt.read("CAND", words, 3)
    assert [list(i) for i in fields["indices"]] == [list(i) for i in indices]  # in the sender's order
    with pytest.raises(CorruptMessage, match="a INDEX message has 9 words here, got 8"):
        fmt.read("INDEX", words, 3)
