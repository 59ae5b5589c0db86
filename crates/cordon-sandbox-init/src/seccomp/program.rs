//! Joining seccompiler's programs into the one program the kernel runs.
//!
//! seccompiler builds one program per action (`EPERM`, `ENOSYS`). Installed as two filters,
//! the kernel would compile and run both for every system call; joined, it compiles one. The
//! join is exact: a program's only way to let a call through is a `RET ALLOW`, so turning each
//! `RET ALLOW` of the first program into a jump to the start of the second makes a call pass
//! only when both programs would let it through, and otherwise gives the first program's
//! verdict — the same as the kernel's for two filters whose refusals never overlap (no system
//! call is refused by both here). No other instruction changes, so every jump seccompiler laid
//! out still lands where it did.
//!
//! What seccompiler cannot express is the x32 ABI. On x86_64, x32 system calls arrive with
//! the same `AUDIT_ARCH_X86_64` as native ones, so seccompiler's architecture check lets them
//! in, and with their number offset by `__X32_SYSCALL_BIT` (`0x40000000`) they match none of
//! its rules: `x32 unshare` would sail through. Its rules compare a number for equality only,
//! never a range, so a small hand-written guard goes in front: for an `AUDIT_ARCH_X86_64`
//! call, a number at or above the x32 bit is refused with `EPERM`; every other call (native,
//! or a foreign architecture, which seccompiler's own check then kills) goes on to the joined
//! program.

use seccompiler::sock_filter;

// Classic BPF opcodes (linux/bpf_common.h).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JA: u16 = 0x05;
const BPF_JMP_JEQ_K: u16 = 0x15;
const BPF_JMP_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;

/// `SECCOMP_RET_ALLOW`.
pub const RET_ALLOW: u32 = 0x7fff_0000;
/// `SECCOMP_RET_ERRNO`, to be or-ed with the errno.
pub const RET_ERRNO: u32 = 0x0005_0000;

/// Offset of the system call number in `struct seccomp_data`.
const DATA_NR: u32 = 0;
/// Offset of the architecture in `struct seccomp_data`.
const DATA_ARCH: u32 = 4;

/// `AUDIT_ARCH_X86_64`.
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
/// x32 system call numbers carry this bit.
#[cfg(target_arch = "x86_64")]
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The instructions placed before everything else: on x86_64, refuse x32 system calls.
#[cfg(target_arch = "x86_64")]
pub fn guard() -> Vec<sock_filter> {
    let eperm = RET_ERRNO | libc::EPERM.unsigned_abs();
    vec![
        // 0: A = arch
        stmt(BPF_LD_W_ABS, DATA_ARCH),
        // 1: native x86_64 numbering? yes: 2; no: 5 (the joined program kills foreign arches)
        jump(BPF_JMP_JEQ_K, AUDIT_ARCH_X86_64, 0, 3),
        // 2: A = nr
        stmt(BPF_LD_W_ABS, DATA_NR),
        // 3: an x32 number? yes: 4; no: 5
        jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 1),
        // 4: refuse it
        stmt(BPF_RET_K, eperm),
    ]
}

/// No guard is needed where there is no x32-like second ABI under the same architecture.
#[cfg(not(target_arch = "x86_64"))]
pub fn guard() -> Vec<sock_filter> {
    Vec::new()
}

/// `first` then `second`: every `RET ALLOW` of `first` becomes a jump to `second`'s start.
pub fn join(mut first: Vec<sock_filter>, second: Vec<sock_filter>) -> Vec<sock_filter> {
    let len = first.len();
    for (i, insn) in first.iter_mut().enumerate() {
        if insn.code == BPF_RET_K && insn.k == RET_ALLOW {
            // `JA k` continues at `i + 1 + k`: the first instruction of `second`.
            let k = u32::try_from(len - i - 1).expect("a BPF program is at most 4096 long");
            *insn = stmt(BPF_JMP_JA, k);
        }
    }
    first.extend(second);
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_turns_every_allow_of_the_first_into_a_jump_to_the_second() {
        let first = vec![
            jump(BPF_JMP_JEQ_K, 1, 0, 1),
            stmt(BPF_RET_K, RET_ALLOW),
            stmt(BPF_RET_K, RET_ERRNO | 1),
            stmt(BPF_RET_K, RET_ALLOW),
        ];
        let second = vec![stmt(BPF_RET_K, RET_ERRNO | 38)];
        let joined = join(first, second);
        assert_eq!(joined.len(), 5);
        assert_eq!((joined[1].code, joined[1].k), (BPF_JMP_JA, 2));
        assert_eq!((joined[2].code, joined[2].k), (BPF_RET_K, RET_ERRNO | 1));
        assert_eq!((joined[3].code, joined[3].k), (BPF_JMP_JA, 0));
        assert_eq!((joined[4].code, joined[4].k), (BPF_RET_K, RET_ERRNO | 38));
    }
}
