//! A classic-BPF interpreter for the instructions seccomp filters use, so that tests can ask
//! the compiled program what it decides for a given call without installing it.

use seccompiler::sock_filter;

/// What a filter decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `SECCOMP_RET_ALLOW`.
    Allow,
    /// `SECCOMP_RET_ERRNO` with this errno.
    Errno(i32),
    /// `SECCOMP_RET_KILL_PROCESS`.
    KillProcess,
    /// Any other return value.
    Other(u32),
}

/// Runs `program` for a call of the helper's own architecture.
pub fn run(program: &[sock_filter], nr: u32, args: &[u64; 6]) -> Verdict {
    run_arch(program, native_arch(), nr, args)
}

/// `AUDIT_ARCH_*` of the helper's own architecture.
pub fn native_arch() -> u32 {
    #[cfg(target_arch = "x86_64")]
    let arch = 62 | 0x8000_0000 | 0x4000_0000;
    #[cfg(target_arch = "aarch64")]
    let arch = 183 | 0x8000_0000 | 0x4000_0000;
    #[cfg(target_arch = "riscv64")]
    let arch = 243 | 0x8000_0000 | 0x4000_0000;
    arch
}

/// Runs `program` on a `struct seccomp_data` (little-endian) built from the arguments.
pub fn run_arch(program: &[sock_filter], arch: u32, nr: u32, args: &[u64; 6]) -> Verdict {
    run_counting(program, arch, nr, args).0
}

/// Like [`run_arch`], also returning how many instructions ran.
pub fn run_counting(
    program: &[sock_filter],
    arch: u32,
    nr: u32,
    args: &[u64; 6],
) -> (Verdict, usize) {
    let mut data = Vec::with_capacity(64);
    data.extend_from_slice(&nr.to_le_bytes());
    data.extend_from_slice(&arch.to_le_bytes());
    data.extend_from_slice(&0u64.to_le_bytes()); // instruction pointer
    for a in args {
        data.extend_from_slice(&a.to_le_bytes());
    }
    let word = |off: u32| {
        let off = usize::try_from(off).unwrap();
        u32::from_le_bytes(data[off..off + 4].try_into().unwrap())
    };
    let mut acc: u32 = 0;
    let mut pc = 0usize;
    let mut steps = 0usize;
    loop {
        steps += 1;
        let insn = &program[pc];
        let cond = |taken: bool| pc + 1 + usize::from(if taken { insn.jt } else { insn.jf });
        pc = match insn.code {
            0x20 => {
                acc = word(insn.k);
                pc + 1
            }
            0x54 => {
                acc &= insn.k;
                pc + 1
            }
            0x05 => pc + 1 + usize::try_from(insn.k).unwrap(),
            0x15 => cond(acc == insn.k),
            0x25 => cond(acc > insn.k),
            0x35 => cond(acc >= insn.k),
            0x45 => cond(acc & insn.k != 0),
            0x06 => {
                let verdict = match insn.k {
                    0x7fff_0000 => Verdict::Allow,
                    0x8000_0000 => Verdict::KillProcess,
                    k if k & 0xffff_0000 == 0x0005_0000 => {
                        Verdict::Errno(i32::try_from(k & 0xffff).unwrap())
                    }
                    k => Verdict::Other(k),
                };
                return (verdict, steps);
            }
            code => panic!("instruction {pc}: opcode {code:#x} is not interpreted"),
        };
    }
}
