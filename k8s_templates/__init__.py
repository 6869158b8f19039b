"""Manifest shapes (Jinja2 YAML). Every Kubernetes object Skiff creates is written here once."""
