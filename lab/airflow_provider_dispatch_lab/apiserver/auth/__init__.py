"""Who is asking, and may they: token authentication and RBAC authorization, the bootstrap policy and the
lab's identities (`k8s.io/apiserver/pkg/authentication`, `pkg/authorization`, RBAC's registry).
"""
