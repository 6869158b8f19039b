"""The kubelet: the scripted kubelet, the process runtime (procrt), pod status and logs."""
