//! Landlock: the second, independent layer of filesystem rules (and signal/socket scoping).
//!
//! The plan asks for every access right of the ABI the host reported. When the kernel then
//! enforces the ruleset only in part (`RulesetStatus::PartiallyEnforced`: some right it does
//! not know), the run is refused unless the plan allows it (`--allow-degraded landlock`);
//! either way the rights left unenforced are named, for the run result's sandbox summary.

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::error::{Setup, SetupError};
use crate::plan::LandlockPlan;

/// The name reported when the kernel enforced none of the ruleset.
pub const NOTHING_ENFORCED: &str = "all";

/// Restricts the calling process (and every later child) to the plan's rules. Returns the
/// access rights the kernel left unenforced (empty when the ruleset is fully enforced); fails
/// when some are and the plan does not allow it.
pub fn restrict(plan: &LandlockPlan) -> Setup<Vec<String>> {
    let abi = ABI::from(i32::try_from(plan.abi).unwrap_or(i32::MAX));
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
    let tcp = plan
        .net_connect
        .as_ref()
        .filter(|_| abi >= ABI::V4)
        .map(|_| AccessNet::from_all(abi));
    if let Some(tcp) = tcp {
        ruleset = ruleset.handle_access(tcp).map_err(|e| err("ruleset", &e))?;
    }
    let scopes = if abi >= ABI::V6 {
        Scope::from_all(abi)
    } else {
        BitFlags::EMPTY
    };
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(|e| err("scope", &e))?;
    }
    let mut created = ruleset.create().map_err(|e| err("create", &e))?;
    if plan.list_all_dirs {
        created = created
            .add_rule(PathBeneath::new(
                PathFd::new("/").map_err(|e| err("open /", &e))?,
                AccessFs::ReadDir,
            ))
            .map_err(|e| err("rule", &e))?;
    }
    let rules = plan
        .read
        .iter()
        .map(|p| (p, no_exec(read)))
        .chain(plan.write.iter().map(|p| (p, no_exec(all))))
        .chain(plan.devices.iter().map(|p| (p, device)));
    for (path, access) in rules {
        let fd = PathFd::new(path).map_err(|e| err(&format!("open {}", path.display()), &e))?;
        // A file gets only the file rights of `access`: offered directory rights, the crate
        // would drop them and call the whole ruleset partly enforced. (The object opened is
        // asked, not the path again.)
        let not_dir = rustix::fs::fstat(std::os::fd::AsFd::as_fd(&fd))
            .is_ok_and(|st| !rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir());
        let access = if not_dir {
            access & AccessFs::from_file(abi)
        } else {
            access
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| err("rule", &e))?;
    }
    if tcp.is_some() {
        for port in plan.net_connect.iter().flatten() {
            created = created
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .map_err(|e| err("rule", &e))?;
        }
    }
    for file in plan.exec_only.iter().flatten() {
        let fd = PathFd::new(file).map_err(|e| err(&format!("open {}", file.display()), &e))?;
        created = created
            .add_rule(PathBeneath::new(fd, AccessFs::Execute | AccessFs::ReadFile))
            .map_err(|e| err("rule", &e))?;
    }
    let status = created.restrict_self().map_err(|e| err("restrict", &e))?;
    let kernel = ABI::from(i32::try_from(crate::probe::landlock_abi()).unwrap_or(i32::MAX));
    let unenforced = unenforced_rights(all, scopes, kernel);
    decide(status.ruleset, unenforced, plan.allow_partial)
}

/// The requested rights (file access and scopes) that a kernel of ABI `kernel` does not know,
/// named like `fs.resolve_unix` or `scope.signal`.
pub fn unenforced_rights(
    access: BitFlags<AccessFs>,
    scopes: BitFlags<Scope>,
    kernel: ABI,
) -> Vec<String> {
    let fs = (access & !AccessFs::from_all(kernel))
        .iter()
        .map(|a| format!("fs.{}", snake_case(&format!("{a:?}"))));
    let scope = (scopes & !Scope::from_all(kernel))
        .iter()
        .map(|s| format!("scope.{}", snake_case(&format!("{s:?}"))));
    fs.chain(scope).collect()
}

/// What to do with the kernel's verdict on the ruleset: carry on (returning what was not
/// enforced, for the report) or refuse the run.
pub fn decide(
    status: RulesetStatus,
    unenforced: Vec<String>,
    allow_partial: bool,
) -> Setup<Vec<String>> {
    let unenforced = match status {
        RulesetStatus::FullyEnforced => return Ok(Vec::new()),
        RulesetStatus::PartiallyEnforced if unenforced.is_empty() => {
            vec!["unknown".to_owned()]
        }
        RulesetStatus::PartiallyEnforced => unenforced,
        RulesetStatus::NotEnforced => vec![NOTHING_ENFORCED.to_owned()],
    };
    if allow_partial {
        return Ok(unenforced);
    }
    let what = if unenforced == [NOTHING_ENFORCED] {
        "the kernel enforced none of the Landlock ruleset".to_owned()
    } else {
        format!(
            "the kernel enforced the Landlock ruleset only in part (not enforced: {})",
            unenforced.join(", ")
        )
    };
    Err(SetupError::from(format!(
        "{what}; accept that with --allow-degraded landlock, or use a kernel with a newer Landlock ABI"
    )))
}

fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn full_enforcement_runs_and_reports_nothing() {
        assert_eq!(
            decide(RulesetStatus::FullyEnforced, Vec::new(), false),
            Ok(Vec::new())
        );
        assert_eq!(
            decide(RulesetStatus::FullyEnforced, Vec::new(), true),
            Ok(Vec::new())
        );
    }

    #[test]
    fn partial_enforcement_is_refused_unless_landlock_may_degrade() {
        let missing = names(&["fs.resolve_unix"]);
        let err = decide(RulesetStatus::PartiallyEnforced, missing.clone(), false).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("only in part"), "{text}");
        assert!(text.contains("fs.resolve_unix"), "{text}");
        assert!(text.contains("--allow-degraded landlock"), "{text}");
        assert_eq!(
            decide(RulesetStatus::PartiallyEnforced, missing.clone(), true),
            Ok(missing)
        );
        // The kernel said "partly" but no missing right is known: still reported.
        assert_eq!(
            decide(RulesetStatus::PartiallyEnforced, Vec::new(), true),
            Ok(names(&["unknown"]))
        );
    }

    #[test]
    fn no_enforcement_at_all_is_refused_unless_landlock_may_degrade() {
        let err = decide(RulesetStatus::NotEnforced, Vec::new(), false).unwrap_err();
        assert!(
            err.to_string().contains("none of the Landlock ruleset"),
            "{err}"
        );
        assert_eq!(
            decide(RulesetStatus::NotEnforced, Vec::new(), true),
            Ok(names(&[NOTHING_ENFORCED]))
        );
    }

    #[test]
    fn rights_a_kernel_lacks_are_named() {
        let asked = AccessFs::from_all(ABI::V9);
        let scopes = Scope::from_all(ABI::V9);
        assert_eq!(
            unenforced_rights(asked, scopes, ABI::V7),
            names(&["fs.resolve_unix"])
        );
        assert_eq!(
            unenforced_rights(asked, scopes, ABI::V5),
            names(&[
                "fs.resolve_unix",
                "scope.abstract_unix_socket",
                "scope.signal"
            ])
        );
        assert_eq!(
            unenforced_rights(asked, scopes, ABI::V9),
            Vec::<String>::new()
        );
        assert_eq!(snake_case("IoctlDev"), "ioctl_dev");
    }

    /// Set in the re-executed test process: which plan to restrict itself with.
    const CHILD_ENV: &str = "CORDON_LANDLOCK_TEST_CHILD";

    /// The real kernel: a ruleset asking for rights newer than the kernel's ABI is partly
    /// enforced, and the helper refuses it unless allowed. Each case runs in a fresh process
    /// (this test binary, re-executed), since a Landlock restriction cannot be undone.
    #[test]
    fn a_ruleset_newer_than_the_kernel_is_refused_or_reported() {
        if let Ok(mode) = std::env::var(CHILD_ENV) {
            let plan = LandlockPlan {
                abi: 9,
                read: vec!["/usr".into()],
                write: Vec::new(),
                devices: Vec::new(),
                exec_only: None,
                allow_partial: mode == "allow",
                net_connect: None,
                list_all_dirs: true,
            };
            match restrict(&plan) {
                Ok(unenforced) => println!("RESULT ok {}", unenforced.join(",")),
                Err(e) => println!("RESULT refused {e}"),
            }
            std::process::exit(0);
        }
        let kernel = crate::probe::landlock_abi();
        if kernel == 0 || kernel >= 9 {
            eprintln!(
                "SKIP: this test needs a kernel Landlock ABI between 1 and 8 (it has {kernel})"
            );
            return;
        }
        let run = |mode: &str| {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "landlock::tests::a_ruleset_newer_than_the_kernel_is_refused_or_reported",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, mode)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            // libtest prints its own line around ours: take what follows the marker.
            stdout
                .lines()
                .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r.to_owned()))
                .unwrap_or_else(|| panic!("no result from the child: {out:?}"))
        };
        let refused = run("refuse");
        assert!(
            refused.starts_with("refused ") && refused.contains("fs.resolve_unix"),
            "{refused}"
        );
        assert_eq!(run("allow"), "ok fs.resolve_unix");
    }
}
