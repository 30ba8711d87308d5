"""The models a benchmark worker trains (on synthetic input or on Fashion-MNIST images).

    mlp10m      an MLP 1024-2048-2048-2048-10 (10.5M parameters) on synthetic input, batch 32
    mlp-deep    an MLP of 16 hidden layers of 768 (9.6M parameters, 34 tensors), synthetic input, batch
                32: the many-layer case that merging and pipelining are for
    fmnist-cnn  the Fashion-MNIST example's CNN (examples/train_fashion_mnist.py), real images, batch 64
    cnn-fc      a VGG-like network on Fashion-MNIST images, batch 64: four 3x3 convolutions (32, 32, 64,
                64 channels; most of the compute) under fully connected layers 3136-2048-2048-10 (10.7M
                parameters, nearly all in the head, whose gradients backward produces first): the
                layout pipelining is for
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ["mlp10m", "mlp-deep", "fmnist-cnn", "cnn-fc"]
MLP_WIDTHS = {"mlp10m": (2048,) * 3, "mlp-deep": (768,) * 16}


def model_and_batches(model, rank, workers):
    """(network, input shape, batch size, function step -> (x, y)) of one worker."""
    import numpy as np
    import mxnet as mx
    from mxnet import gluon

    from examples import fashion_mnist, models

    if model in MLP_WIDTHS:
        net = gluon.nn.HybridSequential()
        for width in MLP_WIDTHS[model]:
            net.add(gluon.nn.Dense(width, activation="relu"))
        net.add(gluon.nn.Dense(10))
        rng = np.random.default_rng(rank)
        x = mx.nd.array(rng.standard_normal((32, 1024)).astype(np.float32))
        y = mx.nd.array(rng.integers(0, 10, 32).astype(np.float32))
        return net, (1, 1024), 32, lambda step: (x, y)
    images, labels = fashion_mnist.shard(*fashion_mnist.load("train"), rank, workers)
    batch = 64

    def batches(step):
        start = (step * batch) % (len(images) - batch)
        return models.to_batch(images[start:start + batch], labels[start:start + batch])

    return models.build_model("cnn" if model == "fmnist-cnn" else model), (1, 1, 28, 28), batch, batches


def local_gradients(model):
    """The model's gradients after one forward and backward pass on this machine (no kvstore)."""
    import mxnet as mx
    from mxnet import autograd, gluon

    net, shape, _, batches = model_and_batches(model, 0, 1)
    net.initialize(mx.init.Xavier(magnitude=2))
    net(mx.nd.zeros(shape))
    x, y = batches(0)
    with autograd.record():
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
    loss.backward()
    return [p.grad() for p in net.collect_params().values() if p.grad_req != "null"]


def codec_times(mode, arrays, repeats=5):
    """Median seconds to encode, and to decode, all ``arrays`` with the mode's codec (mxnet_gc's only)."""
    import statistics
    import time

    import mxnet as mx
    import mxnet_gc

    params = dict(mode.compression or {})
    kind = {"gc_2bit": "2bit", "4bit": "4bit", "layerwise_topk": "layerwise_topk"}.get(params.get("type"))
    if kind is None or mode.store != "gc":
        return None, None
    codec = mxnet_gc.codecs.create({"type": kind, **{k: v for k, v in params.items()
                                                     if k in ("threshold", "thresholds", "density")}})
    residuals = [codec.new_residual(a.shape) for a in arrays]
    payloads = [mx.nd.zeros((codec.payload_size(a.size),)) for a in arrays]
    outs = [mx.nd.zeros(a.shape) for a in arrays]
    encode, decode = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for a, r, p in zip(arrays, residuals, payloads):
            codec.encode(a, r, out=p)
        mx.nd.waitall()
        t1 = time.perf_counter()
        for p, o in zip(payloads, outs):
            codec.decode(p, o)
        mx.nd.waitall()
        encode.append(t1 - t0)
        decode.append(time.perf_counter() - t1)
    return statistics.median(encode), statistics.median(decode)
