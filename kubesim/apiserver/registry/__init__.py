"""The generic registry store and the per-kind strategies (k8s.io/apiserver/pkg/registry)."""
