"""kube-apiserver: storage, registry, admission, authentication and authorization, HTTP endpoints."""
