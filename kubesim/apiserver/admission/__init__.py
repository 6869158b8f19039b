"""Admission: validation, defaulting, schemas and the admission plugins."""
