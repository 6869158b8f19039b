"""Skiff's operators, triggers and helpers: the package DAG authors import (``from operators import ...``)."""
