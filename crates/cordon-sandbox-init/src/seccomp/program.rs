//! The parts of the installed program that seccompiler does not make: the front that refuses
//! x32 system calls, and the joint of the `EPERM` and `ENOSYS` programs.

use seccompiler::sock_filter;

// Classic BPF opcodes (linux/bpf_common.h).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JA: u16 = 0x05;
#[cfg(target_arch = "x86_64")]
const BPF_JMP_JEQ_K: u16 = 0x15;
#[cfg(target_arch = "x86_64")]
const BPF_JMP_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;

/// `SECCOMP_RET_ALLOW`.
pub const RET_ALLOW: u32 = 0x7fff_0000;
/// `SECCOMP_RET_ERRNO`, to be or-ed with the errno.
#[cfg(target_arch = "x86_64")]
pub const RET_ERRNO: u32 = 0x0005_0000;

/// Offset of the system call number in `struct seccomp_data`.
#[cfg(target_arch = "x86_64")]
const DATA_NR: u32 = 0;
/// Offset of the architecture in `struct seccomp_data`.
#[cfg(target_arch = "x86_64")]
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

#[cfg(target_arch = "x86_64")]
fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The program's front: on x86_64, refuse x32 system calls, which arrive with the same
/// `AUDIT_ARCH_X86_64` as native ones (their number offset by `__X32_SYSCALL_BIT`), so that
/// seccompiler's programs cannot tell them apart.
#[cfg(target_arch = "x86_64")]
pub fn guard() -> Vec<sock_filter> {
    let eperm = RET_ERRNO | libc::EPERM.unsigned_abs();
    vec![
        // 0: A = arch
        stmt(BPF_LD_W_ABS, DATA_ARCH),
        // 1: native x86_64 numbering? yes: 2; no: 5 (the programs after it kill foreign
        //    architectures)
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

/// `first` then `second`: every `RET ALLOW` of `first` becomes a jump to `second`'s start
/// (seccompiler makes one program per action).
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
            sock_filter {
                code: 0x15,
                jt: 0,
                jf: 1,
                k: 1,
            },
            stmt(BPF_RET_K, RET_ALLOW),
            stmt(BPF_RET_K, 0x0005_0000 | 1),
            stmt(BPF_RET_K, RET_ALLOW),
        ];
        let second = vec![stmt(BPF_RET_K, 0x0005_0000 | 38)];
        let joined = join(first, second);
        assert_eq!(joined.len(), 5);
        assert_eq!((joined[1].code, joined[1].k), (BPF_JMP_JA, 2));
        assert_eq!((joined[2].code, joined[2].k), (BPF_RET_K, 0x0005_0000 | 1));
        assert_eq!((joined[3].code, joined[3].k), (BPF_JMP_JA, 0));
        assert_eq!((joined[4].code, joined[4].k), (BPF_RET_K, 0x0005_0000 | 38));
    }
}
