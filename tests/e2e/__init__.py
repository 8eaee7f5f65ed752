"""End-to-end tests against a real kube-apiserver (DESIGN.md §9)."""
