"""kube-controller-manager and kube-scheduler: the controller framework and each controller."""
