"""What every layer shares: errors, names, selectors, quantities, time (k8s.io/apimachinery)."""
