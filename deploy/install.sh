#!/bin/sh
# Install Skiff's runtime into a Python environment: the pinned requirements, then the `skiff` package
# (operators + k8s_templates) without touching those pins. The Dockerfile runs exactly this, and
# tests/integration/deploy/test_image_install.py runs it in a clean venv (there is no Docker engine in CI).
#   deploy/install.sh SRC [PIP]   SRC: a directory holding requirements.txt, pyproject.toml, operators/,
#                                 k8s_templates/; PIP: the pip to use (default: pip on PATH)
set -eu
src=$1
pip=${2:-pip}
"$pip" install --no-cache-dir -r "$src/requirements.txt"
"$pip" install --no-cache-dir --no-deps "$src"
