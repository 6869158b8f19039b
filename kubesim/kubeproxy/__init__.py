"""kube-proxy: Services on the host's loopback for process pods."""
