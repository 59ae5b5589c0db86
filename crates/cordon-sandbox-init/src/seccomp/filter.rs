//! The compiled filter, ready to install in the program's process.

use seccompiler::sock_filter;

use super::{program, rules};
use crate::error::SeccompError;

/// The most instructions a classic BPF program may hold (`BPF_MAXINSNS`).
const MAX_INSTRUCTIONS: usize = 4096;

/// The sandbox's seccomp filter as one classic-BPF program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallFilter {
    program: Vec<sock_filter>,
}

impl SyscallFilter {
    /// Assembles the filter from the rules (see the module documentation of
    /// `seccomp::program`).
    pub fn compile() -> Result<Self, SeccompError> {
        let program = program::assemble(&rules::checks());
        if program.len() > MAX_INSTRUCTIONS {
            return Err(SeccompError::TooLong(program.len()));
        }
        Ok(Self { program })
    }

    /// The number of BPF instructions.
    pub fn len(&self) -> usize {
        self.program.len()
    }

    /// Whether the program is empty (never, for a compiled filter).
    pub fn is_empty(&self) -> bool {
        self.program.is_empty()
    }

    /// The instructions, for inspection.
    pub fn instructions(&self) -> &[sock_filter] {
        &self.program
    }

    /// Installs the filter on the calling thread, for it and every process it starts. Sets
    /// `no_new_privs` first, as the kernel requires of an unprivileged filter. Irreversible.
    pub fn install(&self) -> Result<(), SeccompError> {
        seccompiler::apply_filter(&self.program).map_err(SeccompError::Install)
    }
}

#[cfg(test)]
mod tests {
    use super::super::eval::{Verdict, run};
    use super::*;
    use seccompiler::BpfProgram;

    const EPERM: Verdict = Verdict::Errno(libc::EPERM);

    fn nr(n: libc::c_long) -> u32 {
        u32::try_from(n).unwrap()
    }

    #[test]
    fn the_filter_is_one_program_that_fits() {
        let f = SyscallFilter::compile().unwrap();
        // One comparison per named number, a few per argument rule: seccompiler's own
        // program for the same rules is four times as long, and the kernel compiles it at
        // every sandbox start.
        assert!(
            f.len() > rules::DENIED.len() && f.len() < 128,
            "{}",
            f.len()
        );
        // Every jump lands inside the program, and it ends with a return.
        for (i, insn) in f.instructions().iter().enumerate() {
            if insn.code & 0x07 == 0x05 {
                let reach = if insn.code == 0x05 {
                    usize::try_from(insn.k).unwrap()
                } else {
                    usize::from(insn.jt.max(insn.jf))
                };
                assert!(i + 1 + reach < f.len(), "instruction {i} jumps out");
            }
        }
        assert_eq!(f.instructions().last().unwrap().code, 0x06);
    }

    #[test]
    fn ordinary_calls_pass_and_every_denied_call_is_refused() {
        let f = SyscallFilter::compile().unwrap();
        let p = f.instructions();
        for call in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_wait4,
            libc::SYS_getpid,
        ] {
            assert_eq!(run(p, nr(call), &[0; 6]), Verdict::Allow, "{call}");
        }
        for call in rules::DENIED {
            assert_eq!(run(p, nr(*call), &[0; 6]), EPERM, "{call}");
        }
        assert_eq!(
            run(p, nr(libc::SYS_clone3), &[0; 6]),
            Verdict::Errno(libc::ENOSYS)
        );
    }

    #[test]
    fn argument_rules_refuse_only_what_they_name() {
        let f = SyscallFilter::compile().unwrap();
        let p = f.instructions();
        let arg0 = |v: u64| [v, 0, 0, 0, 0, 0];
        let sigchld = u64::try_from(libc::SIGCHLD).unwrap();
        let clone = nr(libc::SYS_clone);
        assert_eq!(run(p, clone, &arg0(sigchld)), Verdict::Allow);
        // A thread (no namespace flag).
        assert_eq!(run(p, clone, &arg0(0x3d0f00)), Verdict::Allow);
        for flag in rules::NAMESPACE_FLAGS {
            let flags = u64::try_from(*flag).unwrap() | sigchld;
            assert_eq!(run(p, clone, &arg0(flags)), EPERM, "{flag:#x}");
        }
        let ioctl = nr(libc::SYS_ioctl);
        let req = |r: u64| [0, r, 0, 0, 0, 0];
        assert_eq!(run(p, ioctl, &req(libc::TCGETS)), Verdict::Allow);
        assert_eq!(run(p, ioctl, &req(libc::TIOCSTI)), EPERM);
        assert_eq!(run(p, ioctl, &req(libc::TIOCLINUX)), EPERM);
        // The kernel reads the request as 32 bits: junk above does not hide it.
        assert_eq!(run(p, ioctl, &req(libc::TIOCSTI | 1 << 32)), EPERM);
        let personality = nr(libc::SYS_personality);
        assert_eq!(run(p, personality, &arg0(0)), Verdict::Allow);
        assert_eq!(run(p, personality, &arg0(0xffff_ffff)), Verdict::Allow);
        assert_eq!(run(p, personality, &arg0(0x0040_0000)), EPERM);
        let socket = nr(libc::SYS_socket);
        let domain = |d: libc::c_int| arg0(u64::try_from(d).unwrap());
        assert_eq!(run(p, socket, &domain(libc::AF_INET)), Verdict::Allow);
        assert_eq!(run(p, socket, &domain(libc::AF_UNIX)), Verdict::Allow);
        assert_eq!(run(p, socket, &domain(libc::AF_VSOCK)), EPERM);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_calls_and_foreign_architectures_are_refused() {
        use super::super::eval::run_arch;
        use super::super::program::{AUDIT_ARCH_X86_64, X32_SYSCALL_BIT};
        const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
        let f = SyscallFilter::compile().unwrap();
        let p = f.instructions();
        let x32 = |n: libc::c_long| nr(n) | X32_SYSCALL_BIT;
        for call in [libc::SYS_getpid, libc::SYS_unshare, libc::SYS_read] {
            assert_eq!(run_arch(p, AUDIT_ARCH_X86_64, x32(call), &[0; 6]), EPERM);
        }
        assert_eq!(
            run_arch(p, AUDIT_ARCH_I386, 20, &[0; 6]),
            Verdict::KillProcess
        );
    }

    /// The installed program decides as seccompiler's compilation of the same rules: every
    /// number (native, x32, small and large, of three architectures) with every argument the
    /// rules look at gets the same verdict.
    #[test]
    fn the_installed_program_decides_as_seccompilers_reference() {
        use super::super::eval::{native_arch, run_arch};
        let eperm = BpfProgram::try_from(rules::eperm_filter().unwrap()).unwrap();
        let enosys = BpfProgram::try_from(rules::enosys_filter().unwrap()).unwrap();
        let mut full = program::guard();
        full.extend(program::join(eperm, enosys));
        let with = SyscallFilter::compile().unwrap();
        assert!(with.len() * 3 < full.len(), "{} {}", with.len(), full.len());
        let flag = |f: libc::c_int| u64::try_from(f).unwrap();
        let mut args: Vec<[u64; 6]> = vec![[0; 6], [u64::MAX; 6]];
        for f in rules::NAMESPACE_FLAGS {
            args.push([flag(*f) | 17, 0, 0, 0, 0, 0]);
        }
        for r in [libc::TIOCSTI, libc::TIOCLINUX, libc::TCGETS] {
            args.push([0, r, 0, 0, 0, 0]);
            args.push([0, r | 1 << 32, 0, 0, 0, 0]);
        }
        for d in [libc::AF_VSOCK, libc::AF_INET, libc::AF_UNIX] {
            args.push([flag(d), 0, 0, 0, 0, 0]);
        }
        for p in [0, rules::PERSONALITY_QUERY, 0x0040_0000] {
            args.push([p, 0, 0, 0, 0, 0]);
        }
        let numbers: Vec<u32> = (0..1100)
            .chain((0..1100).map(|n| n | 0x4000_0000))
            .chain([0x3fff_ffff, 0x7fff_ffff, 0x8000_0000, u32::MAX])
            .collect();
        let same = |arch: u32, n: u32, a: &[u64; 6]| {
            assert_eq!(
                run_arch(with.instructions(), arch, n, a),
                run_arch(&full, arch, n, a),
                "arch {arch:#x} nr {n:#x} args {a:x?}"
            );
        };
        for arch in [native_arch(), 3 | 0x4000_0000, 40 | 0x4000_0000] {
            for &n in &numbers {
                for a in &args {
                    same(arch, n, a);
                }
            }
        }
        // Every named number and its neighbours (native, x32, with high bits), against every
        // value a rule compares, one off either side, with and without junk in its upper
        // half, alone in its upper half, in every argument slot, the others 0 or all ones.
        let mut values: Vec<u64> = rules::NAMESPACE_FLAGS.iter().map(|f| flag(*f)).collect();
        values.extend([libc::TIOCSTI, libc::TIOCLINUX, rules::PERSONALITY_QUERY, 0]);
        values.push(flag(libc::AF_VSOCK));
        let mut variants = Vec::new();
        for v in values {
            for w in [v.wrapping_sub(1), v, v + 1] {
                variants.extend([w, w | 0xdead_beef << 32, w << 32]);
            }
        }
        let mut boundary_args = Vec::new();
        for slot in 0..6 {
            for &v in &variants {
                let mut a = [0; 6];
                a[slot] = v;
                boundary_args.push(a);
                a = [u64::MAX; 6];
                a[slot] = v;
                boundary_args.push(a);
            }
        }
        let named: Vec<u32> = rules::checks()
            .iter()
            .flat_map(|&(n, _)| [n.wrapping_sub(1), n, n + 1])
            .flat_map(|n| [n, n | 0x4000_0000, n | 0x8000_0000])
            .collect();
        for arch in [native_arch(), 3 | 0x4000_0000] {
            for &n in &named {
                for a in &boundary_args {
                    same(arch, n, a);
                }
            }
        }
    }

    /// Every system call runs the filter: the common ones are decided after a handful of
    /// instructions (the binary search), whatever their number. Prints the figures too
    /// (`cargo test -p cordon-sandbox-init -- --nocapture seccomp_cost`).
    #[test]
    fn seccomp_cost() {
        use super::super::eval::{native_arch, run_counting};
        let f = SyscallFilter::compile().unwrap();
        println!("instructions: {}", f.len());
        let calls: [(&str, libc::c_long, [u64; 6], Verdict); 6] = [
            ("read", libc::SYS_read, [0; 6], Verdict::Allow),
            ("futex", libc::SYS_futex, [0; 6], Verdict::Allow),
            (
                "clone(SIGCHLD)",
                libc::SYS_clone,
                [17, 0, 0, 0, 0, 0],
                Verdict::Allow,
            ),
            (
                "ioctl(TCGETS)",
                libc::SYS_ioctl,
                [0, libc::TCGETS, 0, 0, 0, 0],
                Verdict::Allow,
            ),
            ("mount", libc::SYS_mount, [0; 6], EPERM),
            (
                "clone3",
                libc::SYS_clone3,
                [0; 6],
                Verdict::Errno(libc::ENOSYS),
            ),
        ];
        for (name, call, args, expected) in calls {
            let (verdict, steps) = run_counting(f.instructions(), native_arch(), nr(call), &args);
            println!("{name}: {verdict:?} after {steps} instructions");
            assert_eq!(verdict, expected, "{name}");
            assert!(steps <= 16, "{name}: {steps} instructions");
        }
    }
}
