//! Test harness: a real Kubernetes control plane on loopback, for end-to-end tests.
