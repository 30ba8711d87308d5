"""How the benchmarks print a target: the measured ratio, the target, and a marker when it is missed."""


def line(text, value, op, bound):
    """``- TEXT: VALUE (target OP BOUND)``, followed by **MISSED** when VALUE does not meet it."""
    met = value >= bound if op == ">=" else value <= bound
    return "- %s: %.2f (target %s %s)%s" % (text, value, op, bound, "" if met else "  **MISSED**")
