"""Skiff's benchmarks (``make bench``): each module's ``run()`` returns a Markdown section for BENCHMARKS.md."""
