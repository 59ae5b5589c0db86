//! The seccomp filter: syscalls a sandboxed program never needs and an escape would.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

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

/// Namespace-creating `clone` flags.
const NS_FLAGS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

fn arch() -> TargetArch {
    #[cfg(target_arch = "x86_64")]
    let a = TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    let a = TargetArch::aarch64;
    #[cfg(target_arch = "riscv64")]
    let a = TargetArch::riscv64;
    a
}

fn cond(arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64) -> Setup<SeccompCondition> {
    SeccompCondition::new(arg, len, op, value).map_err(|e| format!("seccomp condition: {e}"))
}

fn rule(conds: Vec<SeccompCondition>) -> Setup<SeccompRule> {
    SeccompRule::new(conds).map_err(|e| format!("seccomp rule: {e}"))
}

/// Compiles the filters (installed in order in the program's process).
pub fn build() -> Setup<Vec<BpfProgram>> {
    use SeccompCmpArgLen::{Dword, Qword};
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|s| (*s, Vec::new())).collect();
    let clone_rules = NS_FLAGS
        .iter()
        .map(|f| rule(vec![cond(0, Qword, SeccompCmpOp::MaskedEq(*f), *f)?]))
        .collect::<Setup<Vec<_>>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    let ioctl_rules = [libc::TIOCSTI, libc::TIOCLINUX]
        .iter()
        .map(|req| rule(vec![cond(1, Dword, SeccompCmpOp::Eq, *req)?]))
        .collect::<Setup<Vec<_>>>()?;
    rules.insert(libc::SYS_ioctl, ioctl_rules);
    // Only querying the personality (0xffffffff) and PER_LINUX (0) stay allowed.
    rules.insert(
        libc::SYS_personality,
        vec![rule(vec![
            cond(0, Dword, SeccompCmpOp::Ne, 0)?,
            cond(0, Dword, SeccompCmpOp::Ne, 0xffff_ffff)?,
        ])?],
    );
    let eperm = u32::try_from(libc::EPERM).expect("small");
    let deny = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(eperm),
        arch(),
    )
    .map_err(|e| format!("seccomp filter: {e}"))?;
    // clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back to
    // clone, whose flags the filter above checks.
    let enosys = u32::try_from(libc::ENOSYS).expect("small");
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(enosys),
        arch(),
    )
    .map_err(|e| format!("seccomp filter: {e}"))?;
    let compile = |f: SeccompFilter| {
        BpfProgram::try_from(f).map_err(|e| format!("compile seccomp filter: {e}"))
    };
    Ok(vec![compile(deny)?, compile(clone3)?])
}

/// Installs the compiled filters on the calling thread (needs `no_new_privs`).
pub fn install(filters: &[BpfProgram]) -> Setup<()> {
    for f in filters {
        seccompiler::apply_filter(f).map_err(|e| format!("install the seccomp filter: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn filters_compile() {
        let f = super::build().unwrap();
        assert_eq!(f.len(), 2);
        assert!(f[0].len() > 40);
    }
}
