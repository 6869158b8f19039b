"""Authentication, RBAC authorization and the access reviews."""
