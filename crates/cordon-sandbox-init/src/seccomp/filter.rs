//! The compiled filter, ready to install in the program's process.

use seccompiler::{BpfProgram, sock_filter};

use super::program;
use super::rules::{self, FilterOptions};
use crate::error::SeccompError;

/// The most instructions a classic BPF program may hold (`BPF_MAXINSNS`).
const MAX_INSTRUCTIONS: usize = 4096;

/// The sandbox's seccomp filter as one classic-BPF program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallFilter {
    program: Vec<sock_filter>,
}

impl SyscallFilter {
    /// Compiles the filter from the rules (see the module documentation of `seccomp::rules`).
    pub fn compile(options: FilterOptions) -> Result<Self, SeccompError> {
        let eperm = BpfProgram::try_from(rules::eperm_filter(options)?)?;
        let enosys = BpfProgram::try_from(rules::enosys_filter()?)?;
        let mut program = program::guard();
        program.extend(program::join(eperm, enosys));
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
    use super::super::rules::ExecMemory;
    use super::*;
    use crate::plan::SocketFamilies;

    fn options(exec_memory: ExecMemory) -> FilterOptions {
        FilterOptions {
            exec_memory,
            sockets: None,
        }
    }

    const EPERM: Verdict = Verdict::Errno(libc::EPERM);

    fn nr(n: libc::c_long) -> u32 {
        u32::try_from(n).unwrap()
    }

    #[test]
    fn ordinary_calls_pass_and_every_denied_call_is_refused() {
        let f = SyscallFilter::compile(options(ExecMemory::Allowed)).unwrap();
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
        let f = SyscallFilter::compile(options(ExecMemory::Allowed)).unwrap();
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
        let f = SyscallFilter::compile(options(ExecMemory::Allowed)).unwrap();
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

    #[test]
    fn every_jump_lands_inside_the_program_and_it_ends_with_a_return() {
        for memory in [ExecMemory::Allowed, ExecMemory::Denied] {
            let f = SyscallFilter::compile(options(memory)).unwrap();
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
    }

    #[test]
    fn without_exec_memory_only_files_can_be_mapped_executable() {
        const PROT_RX: u64 = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        const PROT_RW: u64 = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        const ANON: u64 = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        const FILE: u64 = libc::MAP_PRIVATE as u64;
        let denied = SyscallFilter::compile(options(ExecMemory::Denied)).unwrap();
        let allowed = SyscallFilter::compile(options(ExecMemory::Allowed)).unwrap();
        let mmap = nr(libc::SYS_mmap);
        let mprotect = nr(libc::SYS_mprotect);
        let cases: [(u32, [u64; 6], Verdict); 10] = [
            // A JIT's code: anonymous and executable.
            (mmap, [0, 4096, PROT_RX, ANON, u64::MAX, 0], EPERM),
            // Junk in the upper halves does not hide it.
            (
                mmap,
                [0, 4096, PROT_RX | 1 << 40, ANON | 1 << 33, 0, 0],
                EPERM,
            ),
            // The dynamic loader mapping a library: a file, executable.
            (mmap, [0, 4096, PROT_RX, FILE, 3, 0], Verdict::Allow),
            // Ordinary heap memory.
            (mmap, [0, 4096, PROT_RW, ANON, u64::MAX, 0], Verdict::Allow),
            (mprotect, [0, 4096, PROT_RX, 0, 0, 0], EPERM),
            (
                nr(libc::SYS_pkey_mprotect),
                [0, 4096, PROT_RX, 0, 0, 0],
                EPERM,
            ),
            // RELRO: read-only after relocation.
            (
                mprotect,
                [0, 4096, libc::PROT_READ as u64, 0, 0, 0],
                Verdict::Allow,
            ),
            (nr(libc::SYS_memfd_create), [0, 0, 0, 0, 0, 0], EPERM),
            (nr(libc::SYS_memfd_secret), [0, 0, 0, 0, 0, 0], EPERM),
            (nr(libc::SYS_shmat), [1, 0, 0o100000, 0, 0, 0], EPERM),
        ];
        for (call, args, verdict) in cases {
            assert_eq!(
                run(denied.instructions(), call, &args),
                verdict,
                "{call} {args:x?}"
            );
            assert_eq!(
                run(allowed.instructions(), call, &args),
                Verdict::Allow,
                "{call} {args:x?}"
            );
        }
        assert_eq!(
            run(
                denied.instructions(),
                nr(libc::SYS_shmat),
                &[1, 0, 0, 0, 0, 0]
            ),
            Verdict::Allow
        );
    }

    #[test]
    fn socket_families_are_refused_as_the_tier_says() {
        let socket = nr(libc::SYS_socket);
        let call = |f: &SyscallFilter, family: libc::c_int, kind: libc::c_int| {
            let flags = u64::try_from(kind | libc::SOCK_CLOEXEC).unwrap();
            run(
                f.instructions(),
                socket,
                &[u64::try_from(family).unwrap(), flags, 0, 0, 0, 0],
            )
        };
        let compile = |unix, tcp| {
            SyscallFilter::compile(FilterOptions {
                exec_memory: ExecMemory::Allowed,
                sockets: Some(SocketFamilies { unix, tcp }),
            })
            .unwrap()
        };
        let any = SyscallFilter::compile(options(ExecMemory::Allowed)).unwrap();
        let local = compile(true, false);
        let proxy = compile(true, true);
        let none = compile(false, false);
        for f in [&any, &local, &proxy, &none] {
            assert_eq!(call(f, libc::AF_VSOCK, libc::SOCK_STREAM), EPERM);
        }
        assert_eq!(call(&any, libc::AF_INET, libc::SOCK_DGRAM), Verdict::Allow);
        assert_eq!(call(&any, libc::AF_NETLINK, libc::SOCK_RAW), Verdict::Allow);
        for f in [&local, &proxy, &none] {
            assert_eq!(call(f, libc::AF_NETLINK, libc::SOCK_RAW), EPERM);
            assert_eq!(call(f, libc::AF_PACKET, libc::SOCK_RAW), EPERM);
        }
        assert_eq!(
            call(&local, libc::AF_UNIX, libc::SOCK_STREAM),
            Verdict::Allow
        );
        assert_eq!(call(&local, libc::AF_INET, libc::SOCK_STREAM), EPERM);
        assert_eq!(call(&local, libc::AF_INET6, libc::SOCK_STREAM), EPERM);
        assert_eq!(
            call(&proxy, libc::AF_INET, libc::SOCK_STREAM),
            Verdict::Allow
        );
        assert_eq!(
            call(&proxy, libc::AF_INET6, libc::SOCK_STREAM),
            Verdict::Allow
        );
        assert_eq!(call(&proxy, libc::AF_INET, libc::SOCK_DGRAM), EPERM);
        assert_eq!(call(&proxy, libc::AF_INET6, libc::SOCK_RAW), EPERM);
        assert_eq!(call(&none, libc::AF_UNIX, libc::SOCK_STREAM), EPERM);
    }
}
