//! The seccomp filter: system calls a sandboxed program never needs and an escape would.
//!
//! The rules are data for seccompiler ([`rules`]); seccompiler generates one classic-BPF
//! program per action, and [`program`] joins them, behind a hand-written guard for x32 system
//! calls, into the single program installed in the program's process.

mod filter;
mod program;
mod rules;

#[cfg(test)]
mod eval;

pub use filter::SyscallFilter;
