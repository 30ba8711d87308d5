"""The Fashion-MNIST example's networks and its input pipeline, shared by the example
(train_fashion_mnist.py) and the studies and benchmarks of tools/ (``from examples import models``).

    cnn      two 3x3 convolutions (32, 64 channels) with max-pooling, a dense layer of 128, 10 classes
    cnn-fc   VGG-like: four 3x3 convolutions under a 10.5M-parameter fully connected head
    resnet20 gluoncv's CIFAR ResNet-20 (its first convolution takes the 1 grey channel)
"""
import numpy as np
import mxnet as mx
from mxnet import gluon

MEAN, STD = 0.2860, 0.3530  # of the Fashion-MNIST training images


def build_model(name):
    """A new, uninitialized network: 'cnn', 'cnn-fc' or 'resnet20'."""
    if name == "cnn":
        net = gluon.nn.HybridSequential()
        net.add(gluon.nn.Conv2D(32, 3, activation="relu"), gluon.nn.MaxPool2D(2),
                gluon.nn.Conv2D(64, 3, activation="relu"), gluon.nn.MaxPool2D(2),
                gluon.nn.Flatten(), gluon.nn.Dense(128, activation="relu"), gluon.nn.Dense(10))
        return net
    if name == "cnn-fc":  # VGG-like: four 3x3 convolutions under a 10.5M-parameter fully connected head
        net = gluon.nn.HybridSequential()
        for i, channels in enumerate((32, 32, 64, 64)):
            net.add(gluon.nn.Conv2D(channels, 3, padding=1, activation="relu"))
            if i % 2:
                net.add(gluon.nn.MaxPool2D(2))
        net.add(gluon.nn.Flatten(), gluon.nn.Dense(2048, activation="relu"), gluon.nn.Dense(2048, activation="relu"),
                gluon.nn.Dense(10))
        return net
    from gluoncv import model_zoo  # CIFAR ResNet-20; its first convolution takes the 1 grey channel

    return model_zoo.get_model("cifar_resnet20_v1", classes=10)


def to_batch(images, labels):
    """(x, y) NDArrays of uint8 images (N, 28, 28) and labels: normalized, one grey channel."""
    x = (images.astype(np.float32) / 255 - MEAN) / STD
    return mx.nd.array(x[:, None]), mx.nd.array(labels.astype(np.float32))


def evaluate(net, images, labels, batch=1000):
    """The accuracy of ``net`` on the images, in batches."""
    accuracy = mx.metric.Accuracy()
    for i in range(0, len(images), batch):
        x, y = to_batch(images[i:i + batch], labels[i:i + batch])
        accuracy.update([y], [net(x)])
    return accuracy.get()[1]
