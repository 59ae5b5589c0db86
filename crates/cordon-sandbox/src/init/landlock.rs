//! Landlock: the second, independent layer of filesystem rules (and signal/socket scoping).

use landlock::{
    ABI, Access, AccessFs, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope,
};

use super::sys::Setup;
use crate::plan::LandlockPlan;

fn abi(v: u32) -> ABI {
    match v {
        0 => ABI::Unsupported,
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        _ => ABI::V7,
    }
}

/// Restricts the calling process (and every later child) to the plan's rules.
pub fn restrict(plan: &LandlockPlan) -> Setup<()> {
    let abi = abi(plan.abi);
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let no_exec = |a: BitFlags<AccessFs>| {
        if plan.exec_only.is_some() {
            a & !AccessFs::Execute
        } else {
            a
        }
    };
    let mut device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::ReadDir;
    if abi >= ABI::V3 {
        device |= AccessFs::Truncate;
    }
    if abi >= ABI::V5 {
        device |= AccessFs::IoctlDev;
    }
    let err = |what: &str, e: &dyn std::fmt::Display| format!("landlock {what}: {e}");
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(|e| err("ruleset", &e))?;
    if abi >= ABI::V6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(|e| err("scope", &e))?;
    }
    let mut created = ruleset.create().map_err(|e| err("create", &e))?;
    created = created
        .add_rule(PathBeneath::new(
            PathFd::new("/").map_err(|e| err("open /", &e))?,
            AccessFs::ReadDir,
        ))
        .map_err(|e| err("rule", &e))?;
    let rules = plan
        .read
        .iter()
        .map(|p| (p, no_exec(read)))
        .chain(plan.write.iter().map(|p| (p, no_exec(all))))
        .chain(plan.devices.iter().map(|p| (p, device)));
    for (path, access) in rules {
        let fd = PathFd::new(path).map_err(|e| err(&format!("open {}", path.display()), &e))?;
        // A file gets only the file rights of `access` (the crate drops the directory ones).
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| err("rule", &e))?;
    }
    for file in plan.exec_only.iter().flatten() {
        let fd = PathFd::new(file).map_err(|e| err(&format!("open {}", file.display()), &e))?;
        created = created
            .add_rule(PathBeneath::new(fd, AccessFs::Execute | AccessFs::ReadFile))
            .map_err(|e| err("rule", &e))?;
    }
    let status = created.restrict_self().map_err(|e| err("restrict", &e))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("landlock: the kernel did not enforce the ruleset".into());
    }
    Ok(())
}
