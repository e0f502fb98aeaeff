"""The simulated cluster: the controllers and machines that run beside the lab's API server.

`cluster` says what a controller is given and `controllers` lists the standard sets; the controllers
themselves are in `workloads` (Trainer, JobSet, Job, garbage collector), `nodes` (scheduler, kubelets,
node lifecycle, taint eviction, PodGC, fencing) and `kueue`. The modules here are the machinery they share
(work queues, object helpers, quantities, webhook denials). Each controller talks to the API server over
HTTP only, as its upstream does.
"""
