//! The seccomp filter: system calls a sandboxed program never needs and an escape would.
//!
//! The rules ([`rules`]) are compiled by seccompiler into one classic-BPF program (an `EPERM`
//! part, then an `ENOSYS` part, behind a front that refuses x32 calls: [`program`]),
//! installed in the program's process.

mod filter;
mod program;
mod rules;

#[cfg(test)]
mod eval;

pub use filter::SyscallFilter;
pub use rules::{ExecMemory, FilterOptions};
