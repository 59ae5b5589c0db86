//! cordon CLI
