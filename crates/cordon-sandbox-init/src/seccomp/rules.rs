//! What the filter refuses.
//!
//! - [`DENIED`]: refused with `EPERM` whatever their arguments;
//! - `clone` with any namespace flag: `EPERM`;
//! - `ioctl(fd, TIOCSTI | TIOCLINUX, ...)` (terminal input injection): `EPERM`;
//! - `personality` with anything but a query (`0xffffffff`) or `PER_LINUX` (`0`): `EPERM`;
//! - `socket(AF_VSOCK, ...)`: `EPERM` (a network namespace does not isolate vsock, the
//!   channel to the hypervisor and other VMs);
//! - `clone3`: `ENOSYS`, because its flags live in memory a filter cannot read; libc then
//!   falls back to `clone`, whose flags the rules above check.
//!
//! Argument comparisons are on 32 bits where the kernel reads an `int` or `unsigned int`
//! (`ioctl`'s request, `personality`'s persona, `socket`'s domain): a value with junk in its
//! upper half is the same call to the kernel and must match the same rule. `clone`'s flags
//! are an `unsigned long`, but every namespace flag is in its lower half.
//!
//! The rules are written twice, on purpose: [`checks`] is what the installed program is
//! assembled from (see `program`), and, in the tests, the same rules as seccompiler rules are
//! compiled by seccompiler into the reference program that every verdict of the installed
//! one is compared with, for every system call number and every argument the rules look at.

#[cfg(test)]
use std::collections::BTreeMap;

#[cfg(test)]
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

#[cfg(test)]
use crate::error::SeccompError;

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

/// `personality(0xffffffff)` only asks for the current persona.
pub const PERSONALITY_QUERY: u64 = 0xffff_ffff;

#[cfg(test)]
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

#[cfg(test)]
fn dword(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SeccompError> {
    Ok(SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?)
}

#[cfg(test)]
fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SeccompError> {
    Ok(SeccompRule::new(conditions)?)
}

#[cfg(test)]
/// Widens a non-negative libc constant to a comparison value.
fn constant(value: impl TryInto<u64>) -> u64 {
    value
        .try_into()
        .unwrap_or_else(|_| unreachable!("the constants compared are non-negative"))
}

#[cfg(test)]
/// Everything refused with `EPERM`.
pub fn eperm_filter() -> Result<SeccompFilter, SeccompError> {
    Ok(SeccompFilter::new(
        eperm_rules()?,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        target_arch(),
    )?)
}

#[cfg(test)]
/// The `EPERM` rules, by system call number.
fn eperm_rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>, SeccompError> {
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
    rules.insert(
        libc::SYS_socket,
        vec![rule(vec![dword(
            0,
            SeccompCmpOp::Eq,
            constant(libc::AF_VSOCK),
        )?])?],
    );
    Ok(rules)
}

#[cfg(test)]
/// `clone3`, refused with `ENOSYS`.
pub fn enosys_filter() -> Result<SeccompFilter, SeccompError> {
    Ok(SeccompFilter::new(
        enosys_rules(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS.unsigned_abs()),
        target_arch(),
    )?)
}

#[cfg(test)]
/// The `ENOSYS` rules, by system call number.
fn enosys_rules() -> BTreeMap<i64, Vec<SeccompRule>> {
    BTreeMap::from([(libc::SYS_clone3, Vec::new())])
}

/// What the installed program does with a system call that a rule names (every other call
/// is allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Refused with `EPERM`, whatever its arguments.
    Refuse,
    /// Refused with `ENOSYS`, whatever its arguments.
    NoSuchCall,
    /// Refused with `EPERM` when the low 32 bits of argument `arg` share a bit with `mask`.
    AnyBit {
        /// The argument's index (0 to 5).
        arg: u8,
        /// The bits.
        mask: u32,
    },
    /// Refused with `EPERM` when the low 32 bits of argument `arg` are one of `values`.
    OneOf {
        /// The argument's index (0 to 5).
        arg: u8,
        /// The refused values.
        values: &'static [u32],
    },
    /// Refused with `EPERM` unless the low 32 bits of argument `arg` are one of `values`.
    NoneOf {
        /// The argument's index (0 to 5).
        arg: u8,
        /// The allowed values.
        values: &'static [u32],
    },
}

/// Narrows a non-negative libc constant that fits in 32 bits.
const fn low32(value: u64) -> u32 {
    assert!(
        value <= u32::MAX as u64,
        "the constants compared fit in 32 bits"
    );
    value as u32
}

/// The namespace flags as one mask (each is a single bit).
const fn namespace_mask() -> u32 {
    let mut mask = 0;
    let mut i = 0;
    while i < NAMESPACE_FLAGS.len() {
        mask |= low32(NAMESPACE_FLAGS[i] as u64);
        i += 1;
    }
    mask
}

// The request constants' type differs between C libraries (an `unsigned long` in glibc).
#[allow(clippy::unnecessary_cast)]
const TERMINAL_INJECTION: &[u32] = &[low32(libc::TIOCSTI as u64), low32(libc::TIOCLINUX as u64)];
const PERSONALITY_ALLOWED: &[u32] = &[0, low32(PERSONALITY_QUERY)];
const VSOCK: &[u32] = &[low32(libc::AF_VSOCK as u64)];

/// Every system call a rule names, with what the installed program does with it.
pub fn checks() -> Vec<(u32, Check)> {
    let number = |nr: libc::c_long| u32::try_from(nr).expect("system call numbers are small");
    let mut checks: Vec<(u32, Check)> = DENIED
        .iter()
        .map(|nr| (number(*nr), Check::Refuse))
        .collect();
    checks.extend([
        (
            number(libc::SYS_clone),
            Check::AnyBit {
                arg: 0,
                mask: namespace_mask(),
            },
        ),
        (
            number(libc::SYS_ioctl),
            Check::OneOf {
                arg: 1,
                values: TERMINAL_INJECTION,
            },
        ),
        (
            number(libc::SYS_personality),
            Check::NoneOf {
                arg: 0,
                values: PERSONALITY_ALLOWED,
            },
        ),
        (
            number(libc::SYS_socket),
            Check::OneOf {
                arg: 0,
                values: VSOCK,
            },
        ),
        (number(libc::SYS_clone3), Check::NoSuchCall),
    ]);
    checks
}
