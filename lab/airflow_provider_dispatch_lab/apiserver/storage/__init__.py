"""The API server's storage: an MVCC store with one resourceVersion, and LIST and WATCH over it, with
label and field selectors (`k8s.io/apiserver/pkg/storage`).
"""
