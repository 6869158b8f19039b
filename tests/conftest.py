"""Project-wide pytest plugins (each team appends its own plugin module to the list)."""
pytest_plugins = ["kubesim.testing"]
