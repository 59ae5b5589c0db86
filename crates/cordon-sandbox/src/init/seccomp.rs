//! The seccomp filter: syscalls a sandboxed program never needs and an escape would.
//!
//! One classic-BPF program, written out here (about 70 instructions, one JIT compile at
//! install): foreign architectures are killed, x32 syscall numbers refused, the deny list
//! answers `EPERM`, `clone` with namespace flags `EPERM`, `clone3` `ENOSYS` (its flags live in
//! memory a filter cannot read; libc then falls back to `clone`), `ioctl(TIOCSTI|TIOCLINUX)`
//! `EPERM`, and `personality` anything but a query or `PER_LINUX`.

use super::sys::Setup;

/// Syscalls refused with `EPERM` whatever their arguments.
const DENIED: &[libc::c_long] = &[
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_acct,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_syslog,
    libc::SYS_quotactl,
    libc::SYS_vhangup,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_mount_setattr,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
];

/// Namespace-creating `clone` flags (all in the low 32 bits).
const NS_FLAGS: u32 = (libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u32;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: u32 = 243 | 0x8000_0000 | 0x4000_0000;

/// x32 syscalls carry this bit in their number (same `AUDIT_ARCH` as x86_64).
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;

/// Offsets in `struct seccomp_data`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// The low 32 bits of argument `i` (little-endian).
const fn arg_lo(i: u32) -> u32 {
    16 + 8 * i
}

/// A jump target, resolved when the program is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum To {
    Next,
    Eperm,
    Enosys,
    Allow,
    Block(usize),
}

#[derive(Debug, Clone, Copy)]
enum Insn {
    Load(u32),
    Jump { op: u16, k: u32, jt: To, jf: To },
    Ret(u32),
}

/// A compiled filter, ready to install.
#[derive(Debug, Clone)]
pub struct Filter(Vec<libc::sock_filter>);

fn jeq(k: u32, jt: To) -> Insn {
    Insn::Jump {
        op: JEQ_K,
        k,
        jt,
        jf: To::Next,
    }
}

/// Compiles the filter.
pub fn build() -> Setup<Filter> {
    let nr = |n: libc::c_long| u32::try_from(n).expect("syscall numbers are small");
    let mut main = vec![
        Insn::Load(OFF_ARCH),
        Insn::Jump {
            op: JEQ_K,
            k: AUDIT_ARCH,
            jt: To::Next,
            jf: To::Block(1),
        },
        Insn::Load(OFF_NR),
    ];
    #[cfg(target_arch = "x86_64")]
    main.push(Insn::Jump {
        op: JGE_K,
        k: X32_SYSCALL_BIT,
        jt: To::Eperm,
        jf: To::Next,
    });
    main.extend(DENIED.iter().map(|n| jeq(nr(*n), To::Eperm)));
    main.extend([
        jeq(nr(libc::SYS_clone), To::Block(2)),
        jeq(nr(libc::SYS_clone3), To::Enosys),
        jeq(nr(libc::SYS_ioctl), To::Block(3)),
        jeq(nr(libc::SYS_personality), To::Block(4)),
        Insn::Ret(RET_ALLOW),
    ]);
    let blocks: Vec<Vec<Insn>> = vec![
        main,
        // 1: a foreign architecture (e.g. i386 through int 0x80).
        vec![Insn::Ret(RET_KILL_PROCESS)],
        // 2: clone with namespace flags.
        vec![
            Insn::Load(arg_lo(0)),
            Insn::Jump {
                op: JSET_K,
                k: NS_FLAGS,
                jt: To::Eperm,
                jf: To::Allow,
            },
        ],
        // 3: terminal injection.
        vec![
            Insn::Load(arg_lo(1)),
            jeq(libc::TIOCSTI as u32, To::Eperm),
            Insn::Jump {
                op: JEQ_K,
                k: libc::TIOCLINUX as u32,
                jt: To::Eperm,
                jf: To::Allow,
            },
        ],
        // 4: personality: only a query (0xffffffff) or PER_LINUX (0).
        vec![
            Insn::Load(arg_lo(0)),
            jeq(0, To::Allow),
            Insn::Jump {
                op: JEQ_K,
                k: 0xffff_ffff,
                jt: To::Allow,
                jf: To::Eperm,
            },
        ],
        vec![Insn::Ret(RET_ERRNO | libc::EPERM as u32)],
        vec![Insn::Ret(RET_ERRNO | libc::ENOSYS as u32)],
        vec![Insn::Ret(RET_ALLOW)],
    ];
    let (eperm, enosys, allow) = (5, 6, 7);
    let mut starts = Vec::with_capacity(blocks.len());
    let mut at = 0;
    for b in &blocks {
        starts.push(at);
        at += b.len();
    }
    let mut program = Vec::with_capacity(at);
    for insn in blocks.iter().flatten() {
        let here = program.len();
        let offset = |to: To| -> Setup<u8> {
            let target = match to {
                To::Next => here + 1,
                To::Eperm => starts[eperm],
                To::Enosys => starts[enosys],
                To::Allow => starts[allow],
                To::Block(i) => starts[i],
            };
            target
                .checked_sub(here + 1)
                .and_then(|d| u8::try_from(d).ok())
                .ok_or_else(|| "seccomp filter: jump out of range".to_string())
        };
        program.push(match *insn {
            Insn::Load(off) => libc::sock_filter {
                code: LD_W_ABS,
                jt: 0,
                jf: 0,
                k: off,
            },
            Insn::Jump { op, k, jt, jf } => libc::sock_filter {
                code: op,
                jt: offset(jt)?,
                jf: offset(jf)?,
                k,
            },
            Insn::Ret(k) => libc::sock_filter {
                code: RET_K,
                jt: 0,
                jf: 0,
                k,
            },
        });
    }
    Ok(Filter(program))
}

/// Installs the filter on the calling thread (needs `no_new_privs`).
pub fn install(filter: &Filter) -> Setup<()> {
    let prog = libc::sock_fprog {
        len: u16::try_from(filter.0.len()).map_err(|_| "seccomp filter too long".to_string())?,
        filter: filter.0.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points to a valid program that outlives the call (the kernel copies it).
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &prog as *const libc::sock_fprog,
        )
    };
    if r < 0 {
        return Err(format!(
            "install the seccomp filter: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_is_small_and_jumps_resolve() {
        let f = build().unwrap();
        assert!(f.0.len() > DENIED.len() && f.0.len() < 100, "{}", f.0.len());
        assert_eq!(f.0.last().unwrap().code, RET_K);
        // Every jump lands inside the program.
        for (i, insn) in f.0.iter().enumerate() {
            if insn.code & 0x07 == 0x05 {
                assert!(i + 1 + usize::from(insn.jt) < f.0.len());
                assert!(i + 1 + usize::from(insn.jf) < f.0.len());
            }
        }
    }
}
