"""What the API server does with a write, per resource type: the type registry, admission, the create and
update strategy, the patch kinds and deletion (`k8s.io/apiserver/pkg/registry`, `pkg/admission`).
"""
