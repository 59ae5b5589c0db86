//! The program the kernel runs, assembled by hand from [`rules::checks`](super::rules::checks).
//!
//! Layout, every jump forward:
//! 1. the architecture: a foreign one is killed (`RET KILL_PROCESS`);
//! 2. on x86_64, the x32 ABI: x32 system calls arrive with the same `AUDIT_ARCH_X86_64` as
//!    native ones, their number offset by `__X32_SYSCALL_BIT` (`0x40000000`); any number at
//!    or above that bit is refused with `EPERM`;
//! 3. a binary search over the numbers the rules name: one not named is allowed; a named one
//!    jumps to its verdict (`EPERM`, `ENOSYS`) or to its argument check;
//! 4. the argument checks, a few instructions each (`clone`'s flags against every namespace
//!    flag at once, `ioctl`'s request, `personality`'s persona, `socket`'s domain);
//! 5. the shared returns.
//!
//! Why not seccompiler's own program: it spends five instructions on every refused number and
//! six on every flag of `clone`, 399 instructions in all where this takes about 90. The
//! kernel converts and JIT-compiles the whole program at every sandbox start, in time
//! proportional to its length: 150 µs for seccompiler's here, against about 50 µs (measured
//! in BENCHMARKS.md, "Sandbox start-up, round five"). seccompiler still defines the
//! reference: the tests compile the same rules with it and compare every verdict.

use seccompiler::sock_filter;

use super::rules::Check;

// Classic BPF opcodes (linux/bpf_common.h).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JA: u16 = 0x05;
const BPF_JMP_JEQ_K: u16 = 0x15;
const BPF_JMP_JGE_K: u16 = 0x35;
const BPF_JMP_JSET_K: u16 = 0x45;
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

/// The reference program's front (tests): on x86_64, refuse x32 system calls, which
/// seccompiler's programs cannot tell from native ones.
#[cfg(all(test, target_arch = "x86_64"))]
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
#[cfg(all(test, not(target_arch = "x86_64")))]
pub fn guard() -> Vec<sock_filter> {
    Vec::new()
}

/// Where an instruction jumps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum To {
    /// The next instruction.
    Next,
    /// The shared `RET ALLOW`.
    Allow,
    /// The shared `RET ERRNO | EPERM`.
    Eperm,
    /// The shared `RET ERRNO | ENOSYS`.
    Enosys,
    /// The shared `RET KILL_PROCESS`.
    Kill,
    /// The first instruction of the `n`-th argument check.
    Check(usize),
    /// Instruction number `n`.
    At(usize),
}

/// An instruction whose jump targets are still symbolic.
struct Slot {
    code: u16,
    k: u32,
    jt: To,
    jf: To,
}

impl Slot {
    fn stmt(code: u16, k: u32) -> Self {
        Slot {
            code,
            k,
            jt: To::Next,
            jf: To::Next,
        }
    }

    fn jump(code: u16, k: u32, jt: To, jf: To) -> Self {
        Slot { code, k, jt, jf }
    }
}

/// `SECCOMP_RET_KILL_PROCESS`.
const RET_KILL_PROCESS: u32 = 0x8000_0000;

// The argument offsets below are those of a little-endian `struct seccomp_data` (so are
// seccompiler's, and the architecture values of `native_arch`).
#[cfg(target_endian = "big")]
compile_error!("the seccomp program is laid out for little-endian targets only");

/// The low 32 bits of argument `arg` in `struct seccomp_data` (little-endian).
fn arg_offset(arg: u8) -> u32 {
    assert!(arg < 6, "system calls have six arguments");
    16 + 8 * u32::from(arg)
}

/// Assembles the program for `checks` (see the module documentation).
pub fn assemble(checks: &[(u32, Check)]) -> Vec<sock_filter> {
    let mut checks = checks.to_vec();
    checks.sort_unstable_by_key(|(nr, _)| *nr);
    // One check per number: two would leave it to the sort which one counts.
    assert!(
        checks.windows(2).all(|w| w[0].0 != w[1].0),
        "a system call number has two checks"
    );

    let mut slots = vec![
        Slot::stmt(BPF_LD_W_ABS, DATA_ARCH),
        Slot::jump(BPF_JMP_JEQ_K, native_arch(), To::Next, To::Kill),
        Slot::stmt(BPF_LD_W_ABS, DATA_NR),
    ];
    #[cfg(target_arch = "x86_64")]
    slots.push(Slot::jump(
        BPF_JMP_JGE_K,
        X32_SYSCALL_BIT,
        To::Eperm,
        To::Next,
    ));

    // Where each named number goes, and the argument checks in order.
    let mut blocks: Vec<Check> = Vec::new();
    let targets: Vec<(u32, To)> = checks
        .iter()
        .map(|&(nr, check)| {
            let to = match check {
                Check::Refuse => To::Eperm,
                Check::NoSuchCall => To::Enosys,
                _ => {
                    blocks.push(check);
                    To::Check(blocks.len() - 1)
                }
            };
            (nr, to)
        })
        .collect();
    search(&targets, &mut slots);

    let mut check_at = Vec::with_capacity(blocks.len());
    for check in &blocks {
        check_at.push(slots.len());
        argument_check(*check, &mut slots);
    }

    // The shared returns, last.
    let allow_at = slots.len();
    let returns = [
        RET_ALLOW,
        RET_ERRNO | libc::EPERM.unsigned_abs(),
        RET_ERRNO | libc::ENOSYS.unsigned_abs(),
        RET_KILL_PROCESS,
    ];
    let offset = |from: usize, to: To| -> u32 {
        let target = match to {
            To::Next => from + 1,
            To::Allow => allow_at,
            To::Eperm => allow_at + 1,
            To::Enosys => allow_at + 2,
            To::Kill => allow_at + 3,
            To::Check(n) => check_at[n],
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
                let byte = |to| u8::try_from(offset(i, to)).expect("a jump fits in 255");
                jump(s.code, s.k, byte(s.jt), byte(s.jf))
            } else {
                stmt(s.code, s.k)
            }
        })
        .collect();
    out.extend(returns.iter().map(|&k| stmt(BPF_RET_K, k)));
    out
}

/// Appends the instructions deciding `check` from the call's arguments.
fn argument_check(check: Check, slots: &mut Vec<Slot>) {
    match check {
        Check::Refuse | Check::NoSuchCall => unreachable!("decided by the search"),
        Check::AnyBit { arg, mask } => {
            slots.push(Slot::stmt(BPF_LD_W_ABS, arg_offset(arg)));
            slots.push(Slot::jump(BPF_JMP_JSET_K, mask, To::Eperm, To::Allow));
        }
        Check::OneOf { arg, values } | Check::NoneOf { arg, values } => {
            let (found, not_found) = if matches!(check, Check::OneOf { .. }) {
                (To::Eperm, To::Allow)
            } else {
                (To::Allow, To::Eperm)
            };
            slots.push(Slot::stmt(BPF_LD_W_ABS, arg_offset(arg)));
            for (i, &value) in values.iter().enumerate() {
                let last = i + 1 == values.len();
                slots.push(Slot::jump(
                    BPF_JMP_JEQ_K,
                    value,
                    found,
                    if last { not_found } else { To::Next },
                ));
            }
            if values.is_empty() {
                slots.push(Slot::jump(BPF_JMP_JA, 0, not_found, not_found));
            }
        }
    }
}

/// Numbers compared one by one at the end of the search (fewer branch instructions, a few
/// more comparisons on the way).
const LEAF: usize = 4;

/// Appends the search for the accumulator among `sorted`: found, to its target; not found,
/// to `RET ALLOW`.
fn search(sorted: &[(u32, To)], slots: &mut Vec<Slot>) {
    if sorted.len() <= LEAF {
        for (i, &(nr, to)) in sorted.iter().enumerate() {
            let last = i + 1 == sorted.len();
            slots.push(Slot::jump(
                BPF_JMP_JEQ_K,
                nr,
                to,
                if last { To::Allow } else { To::Next },
            ));
        }
        if sorted.is_empty() {
            slots.push(Slot::jump(BPF_JMP_JA, 0, To::Allow, To::Allow));
        }
        return;
    }
    let mid = sorted.len() / 2;
    let split = slots.len();
    slots.push(Slot::jump(BPF_JMP_JGE_K, sorted[mid].0, To::Next, To::Next));
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

/// `first` then `second`: every `RET ALLOW` of `first` becomes a jump to `second`'s start
/// (tests: seccompiler makes one program per action; joined, they are the reference).
#[cfg(test)]
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
