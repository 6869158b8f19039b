"""Development instances: a user's JupyterLab, TensorBoard, sshd and code-server pod, its Service and its
tcp-services ports, created, stopped and culled through the ``dev_instance_*`` DAGs (docs/instance-guide.md).

A regular package (it was an implicit namespace package, which import-linter's contracts cannot see).
"""
