//! Shared helpers for device tests.
