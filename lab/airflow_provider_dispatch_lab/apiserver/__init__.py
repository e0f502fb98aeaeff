"""The lab's Kubernetes API server: the REST API over HTTP, as `k8s.io/apiserver` serves it.

This package holds the HTTP face (`server`, `requests`, `errors`, `discovery`, `openapi`, `tables`) and the
lab-only middlewares on it (`faults`, `delays`, `metering`, `seeding`); `storage`, `registry`, `validation`
and `auth` hold what a request goes through behind it.
"""
