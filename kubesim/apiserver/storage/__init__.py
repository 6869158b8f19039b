"""kubesim's etcd and the watch cache (k8s.io/apiserver/pkg/storage)."""
