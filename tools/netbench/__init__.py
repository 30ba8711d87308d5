"""The network benchmark's parts (tools/bench_network.py is its command line):

models.py    the models a worker trains, and their gradients for the codec timings
modes.py     the modes (store, transport, compression, merge plan) as data, and the link rates
worker.py    one worker of a job, inside the cluster: training steps, timed, and what they cost
jobs.py      one job on its own shaped hosts (tools/netns_cluster.py), and the pooling of repeated runs
report.py    the tables, the target ratios (thresholds in targets.json), the plot, the markdown section
"""
