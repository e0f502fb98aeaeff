"""The node side of the simulated cluster: the scheduler, one kubelet per Node and the machine it runs on,
the node lifecycle and taint eviction controllers, PodGC, and a fencing agent that remediates lost nodes.
"""
