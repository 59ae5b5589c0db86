//! The seccomp filter: system calls a sandboxed program never needs and an escape would.
//!
//! The rules ([`rules`]) are assembled into one short classic-BPF program ([`program`]),
//! installed in the program's process; the tests check every verdict against seccompiler's
//! compilation of the same rules.

mod filter;
mod program;
mod rules;

#[cfg(test)]
mod eval;

pub use filter::SyscallFilter;
