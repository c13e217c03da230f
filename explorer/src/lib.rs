//! Explorer (placeholder until the explorer lands).
