"""The workload controllers, one module per upstream controller: Kubeflow Trainer (with its webhooks),
JobSet (with its webhooks), the batch/v1 Job controller and the garbage collector.
"""
