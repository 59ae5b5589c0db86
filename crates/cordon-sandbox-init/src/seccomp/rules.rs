//! What the filter refuses.
//!
//! - [`DENIED`]: refused with `EPERM` whatever their arguments;
//! - `clone` with any namespace flag: `EPERM`;
//! - `ioctl(fd, TIOCSTI | TIOCLINUX, ...)` (terminal input injection): `EPERM`;
//! - `personality` with anything but a query (`0xffffffff`) or `PER_LINUX` (`0`): `EPERM`
//!   (`READ_IMPLIES_EXEC` among them);
//! - `socket(AF_VSOCK, ...)`: `EPERM` (a network namespace does not isolate vsock, the
//!   channel to the hypervisor and other VMs);
//! - `clone3`: `ENOSYS`, because its flags live in memory a filter cannot read; libc then
//!   falls back to `clone`, whose flags the rules above check;
//! - without executable memory ([`ExecMemory::Denied`], `--allow-exec` without
//!   `--allow-jit`): `mmap` of anonymous memory with `PROT_EXEC`, `mprotect` and
//!   `pkey_mprotect` adding `PROT_EXEC`, `shmat` with `SHM_EXEC`, and `memfd_create` and
//!   `memfd_secret` altogether: `EPERM`. What is executable is then only what a file on an
//!   executable mount holds, and every writable place is mounted `noexec`.
//!
//! Argument comparisons are on 32 bits where the kernel reads an `int` or `unsigned int`
//! (`ioctl`'s request, `personality`'s persona, `socket`'s domain, `mmap`'s and `mprotect`'s
//! protection and flags): a value with junk in its upper half is the same call to the kernel
//! and must match the same rule. `clone`'s flags are an `unsigned long`, but every namespace
//! flag is in its lower half.

use std::collections::BTreeMap;

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

use crate::error::SeccompError;
use crate::plan::SocketFamilies;

/// What the filter refuses beyond its fixed rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterOptions {
    /// Whether memory may be made executable other than by mapping a file.
    pub exec_memory: ExecMemory,
    /// The socket families `socket(2)` may create (`None`: any but `AF_VSOCK`).
    pub sockets: Option<SocketFamilies>,
}

/// Whether the program may make memory executable other than by mapping a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecMemory {
    /// Anonymous executable memory (what a JIT compiler writes its code into), memfds and
    /// `SHM_EXEC` are allowed.
    Allowed,
    /// Only files may be mapped executable (see the module documentation).
    Denied,
}

/// System calls refused with `EPERM` whatever their arguments.
pub const DENIED: &[libc::c_long] = &[
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
    // io_uring performs system calls' work (open, connect, ...) in kernel threads the filter
    // never sees.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
    // Custom segment descriptors: a long-standing source of kernel bugs, needed by no build.
    #[cfg(target_arch = "x86_64")]
    libc::SYS_modify_ldt,
];

/// Namespace-creating `clone` flags.
pub const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// `shmat`'s flag that maps the segment executable (`linux/shm.h`; not in the libc crate
/// for Linux).
const SHM_EXEC: u64 = 0o100000;

/// `SOCK_PACKET` (10): the legacy packet sockets an `AF_INET` socket can still be (the libc
/// crate deprecates the name in favour of `AF_PACKET`, which the rules refuse too).
const LEGACY_SOCK_PACKET: libc::c_int = 10;

/// `personality(0xffffffff)` only asks for the current persona.
pub const PERSONALITY_QUERY: u64 = 0xffff_ffff;

/// The architecture the filter is built for (the helper's own).
pub fn target_arch() -> TargetArch {
    #[cfg(target_arch = "x86_64")]
    let arch = TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    let arch = TargetArch::aarch64;
    #[cfg(target_arch = "riscv64")]
    let arch = TargetArch::riscv64;
    arch
}

fn dword(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SeccompError> {
    Ok(SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SeccompError> {
    Ok(SeccompRule::new(conditions)?)
}

/// Widens a non-negative libc constant to a comparison value.
fn constant(value: impl TryInto<u64>) -> u64 {
    value
        .try_into()
        .unwrap_or_else(|_| unreachable!("the constants compared are non-negative"))
}

/// Everything refused with `EPERM`.
pub fn eperm_filter(options: FilterOptions) -> Result<SeccompFilter, SeccompError> {
    Ok(SeccompFilter::new(
        eperm_rules(options)?,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        target_arch(),
    )?)
}

/// The `EPERM` rules, by system call number.
fn eperm_rules(options: FilterOptions) -> Result<BTreeMap<i64, Vec<SeccompRule>>, SeccompError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            let flag = constant(*flag);
            rule(vec![dword(0, SeccompCmpOp::MaskedEq(flag), flag)?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    let ioctl_rules = [libc::TIOCSTI, libc::TIOCLINUX]
        .into_iter()
        .map(|request| rule(vec![dword(1, SeccompCmpOp::Eq, constant(request))?]))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, ioctl_rules);
    rules.insert(
        libc::SYS_personality,
        vec![rule(vec![
            dword(0, SeccompCmpOp::Ne, 0)?,
            dword(0, SeccompCmpOp::Ne, PERSONALITY_QUERY)?,
        ])?],
    );
    rules.insert(libc::SYS_socket, socket_rules(options.sockets)?);
    if options.exec_memory == ExecMemory::Denied {
        let bit = |arg: u8, bit: u64| dword(arg, SeccompCmpOp::MaskedEq(bit), bit);
        let prot_exec = constant(libc::PROT_EXEC);
        rules.insert(
            libc::SYS_mmap,
            vec![rule(vec![
                bit(2, prot_exec)?,
                bit(3, constant(libc::MAP_ANONYMOUS))?,
            ])?],
        );
        for call in [libc::SYS_mprotect, libc::SYS_pkey_mprotect] {
            rules.insert(call, vec![rule(vec![bit(2, prot_exec)?])?]);
        }
        rules.insert(libc::SYS_shmat, vec![rule(vec![bit(2, SHM_EXEC)?])?]);
        for call in [libc::SYS_memfd_create, libc::SYS_memfd_secret] {
            rules.insert(call, Vec::new());
        }
    }
    Ok(rules)
}

/// When `socket(2)` is refused: always for `AF_VSOCK`; with `families`, for every family but
/// `AF_UNIX` and TCP's, then those unless allowed (TCP: stream sockets only).
fn socket_rules(families: Option<SocketFamilies>) -> Result<Vec<SeccompRule>, SeccompError> {
    let domain = |op, family: libc::c_int| dword(0, op, constant(family));
    let mut rules = vec![rule(vec![domain(SeccompCmpOp::Eq, libc::AF_VSOCK)?])?];
    let Some(families) = families else {
        return Ok(rules);
    };
    rules.push(rule(vec![
        domain(SeccompCmpOp::Ne, libc::AF_UNIX)?,
        domain(SeccompCmpOp::Ne, libc::AF_INET)?,
        domain(SeccompCmpOp::Ne, libc::AF_INET6)?,
    ])?);
    if !families.unix {
        rules.push(rule(vec![domain(SeccompCmpOp::Eq, libc::AF_UNIX)?])?);
    }
    for family in [libc::AF_INET, libc::AF_INET6] {
        if !families.tcp {
            rules.push(rule(vec![domain(SeccompCmpOp::Eq, family)?])?);
            continue;
        }
        // The socket type is the low bits of the second argument (flags above them).
        for kind in [
            libc::SOCK_DGRAM,
            libc::SOCK_RAW,
            libc::SOCK_RDM,
            libc::SOCK_SEQPACKET,
            libc::SOCK_DCCP,
            LEGACY_SOCK_PACKET,
        ] {
            rules.push(rule(vec![
                domain(SeccompCmpOp::Eq, family)?,
                dword(1, SeccompCmpOp::MaskedEq(0xf), constant(kind))?,
            ])?);
        }
    }
    Ok(rules)
}

/// `clone3`, refused with `ENOSYS`.
pub fn enosys_filter() -> Result<SeccompFilter, SeccompError> {
    Ok(SeccompFilter::new(
        enosys_rules(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS.unsigned_abs()),
        target_arch(),
    )?)
}

/// The `ENOSYS` rules, by system call number.
fn enosys_rules() -> BTreeMap<i64, Vec<SeccompRule>> {
    BTreeMap::from([(libc::SYS_clone3, Vec::new())])
}
