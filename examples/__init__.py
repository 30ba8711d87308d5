"""The Fashion-MNIST examples, importable from the source tree (``from examples import models``) by
tools/ and tests; each example is run as a script (``python examples/train_fashion_mnist.py``)."""
