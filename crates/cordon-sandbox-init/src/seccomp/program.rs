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
//!
//! In front of both goes a dispatch ([`dispatch`]): for a native call whose number no rule
//! names, `RET ALLOW` after a binary search over the numbers the rules name; anything else (a
//! named number, an x32 number, a foreign architecture) continues into the program above,
//! unchanged. Its verdicts are the program's by construction (the program allows every number
//! its rules do not name), checked exhaustively by the tests. It matters at installation: the
//! kernel emulates the filter once per system call number to find the calls it may always
//! allow without running it (the seccomp action cache), and seccompiler's linear chain made
//! that walk 123 instructions per number, about 0.15 ms per sandbox start.

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

/// Where a dispatch instruction goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum To {
    /// The next instruction.
    Next,
    /// The dispatch's own `RET ALLOW`.
    Allow,
    /// The first instruction of the full program.
    Full,
    /// Instruction number `n` of the dispatch.
    At(usize),
}

/// A dispatch instruction whose jump targets are still symbolic.
struct Slot {
    code: u16,
    k: u32,
    jt: To,
    jf: To,
}

/// `RET ALLOW` for a native call whose number is not in `named` (below the x32 bit), found by
/// a binary search; every other call continues into `full`, which follows.
pub fn dispatch(named: &[u32], full: Vec<sock_filter>) -> Vec<sock_filter> {
    let mut named = named.to_vec();
    named.sort_unstable();
    named.dedup();
    let mut slots = vec![
        Slot {
            code: BPF_LD_W_ABS,
            k: DATA_ARCH,
            jt: To::Next,
            jf: To::Next,
        },
        // A foreign architecture: the full program decides (seccompiler's check kills it).
        Slot {
            code: BPF_JMP_JEQ_K,
            k: native_arch(),
            jt: To::Next,
            jf: To::Full,
        },
        Slot {
            code: BPF_LD_W_ABS,
            k: DATA_NR,
            jt: To::Next,
            jf: To::Next,
        },
    ];
    #[cfg(target_arch = "x86_64")]
    slots.push(Slot {
        code: BPF_JMP_JGE_K,
        k: X32_SYSCALL_BIT,
        jt: To::Full,
        jf: To::Next,
    });
    search(&named, &mut slots);
    // Offsets: the dispatch, then its `RET ALLOW`, then the full program.
    let allow_at = slots.len();
    let offset = |from: usize, to: To| -> u32 {
        let target = match to {
            To::Next => from + 1,
            To::Allow => allow_at,
            To::Full => allow_at + 1,
            To::At(n) => n,
        };
        u32::try_from(target - from - 1).expect("jumps go forward")
    };
    let mut out: Vec<sock_filter> = slots
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if s.code == BPF_JMP_JA {
                stmt(BPF_JMP_JA, offset(i, s.jt))
            } else if s.code & 0x07 == 0x05 {
                let byte = |to| u8::try_from(offset(i, to)).expect("a dispatch jump fits in 255");
                jump(s.code, s.k, byte(s.jt), byte(s.jf))
            } else {
                stmt(s.code, s.k)
            }
        })
        .collect();
    out.push(stmt(BPF_RET_K, RET_ALLOW));
    out.extend(full);
    out
}

/// Numbers compared one by one at the end of the search (fewer branch instructions, a few
/// more comparisons on the way).
const LEAF: usize = 4;

/// Appends the search for the accumulator among `sorted`: found, to the full program; not
/// found, to `RET ALLOW`.
fn search(sorted: &[u32], slots: &mut Vec<Slot>) {
    if sorted.len() <= LEAF {
        for (i, &nr) in sorted.iter().enumerate() {
            slots.push(Slot {
                code: BPF_JMP_JEQ_K,
                k: nr,
                jt: To::Full,
                jf: if i + 1 == sorted.len() {
                    To::Allow
                } else {
                    To::Next
                },
            });
        }
        if sorted.is_empty() {
            slots.push(Slot {
                code: BPF_JMP_JA,
                k: 0,
                jt: To::Allow,
                jf: To::Allow,
            });
        }
        return;
    }
    let mid = sorted.len() / 2;
    let split = slots.len();
    slots.push(Slot {
        code: BPF_JMP_JGE_K,
        k: sorted[mid],
        jt: To::Next, // patched below: the upper half
        jf: To::Next,
    });
    search(&sorted[..mid], slots);
    slots[split].jt = To::At(slots.len());
    search(&sorted[mid..], slots);
}

/// `AUDIT_ARCH_*` of the helper's own architecture.
fn native_arch() -> u32 {
    #[cfg(target_arch = "x86_64")]
    let arch = AUDIT_ARCH_X86_64;
    #[cfg(target_arch = "aarch64")]
    let arch = 183 | 0x8000_0000 | 0x4000_0000;
    #[cfg(target_arch = "riscv64")]
    let arch = 243 | 0x8000_0000 | 0x4000_0000;
    arch
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
