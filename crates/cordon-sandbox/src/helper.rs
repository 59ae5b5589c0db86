//! Where the sandbox helper executable is: one place, one rule, a clear error when it is not
//! there (never a slower mode of its own).

use std::path::{Path, PathBuf};

use crate::error::{SandboxError, SandboxErrorKind};

/// The name of the helper executable, installed beside `cordon` (`cargo install --path
/// crates/cordon` installs both).
pub const HELPER_NAME: &str = "cordon-sandbox-init";

/// The environment variable that names the helper executable explicitly, for programs that
/// embed cordon's libraries and keep the helper elsewhere.
pub const HELPER_PATH_ENV: &str = "CORDON_SANDBOX_HELPER";

/// The helper executable: [`HELPER_PATH_ENV`] when set; else [`HELPER_NAME`] beside the
/// running executable; else, for a test program that cargo keeps in `target/PROFILE/deps/`,
/// beside that directory (where cargo puts the workspace's executables).
pub fn helper_executable() -> Result<PathBuf, SandboxError> {
    if let Some(path) = std::env::var_os(HELPER_PATH_ENV) {
        let path = PathBuf::from(path);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(no_helper(vec![path], Some(HELPER_PATH_ENV)))
        };
    }
    let exe = std::env::current_exe()
        .map_err(|e| SandboxError::new(SandboxErrorKind::CurrentExe(e), None))?;
    let candidates = candidates(&exe);
    match candidates.iter().find(|c| is_executable(c)) {
        Some(found) => Ok(found.clone()),
        None => Err(no_helper(candidates, None)),
    }
}

/// Where the helper may be for an executable at `exe`.
fn candidates(exe: &Path) -> Vec<PathBuf> {
    let mut out = vec![exe.with_file_name(HELPER_NAME)];
    if let Some(dir) = exe.parent()
        && dir.file_name().is_some_and(|n| n == "deps")
        && let Some(profile_dir) = dir.parent()
    {
        out.push(profile_dir.join(HELPER_NAME));
    }
    out
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn no_helper(looked: Vec<PathBuf>, variable: Option<&'static str>) -> SandboxError {
    let hint = match variable {
        Some(name) => format!("point {name} at cordon-sandbox-init, or unset it"),
        None => "install cordon with `cargo install --path crates/cordon`, which installs \
                 cordon-sandbox-init beside it; in a checkout, `cargo build -p cordon` builds \
                 both (`cargo run` builds cordon alone)"
            .to_owned(),
    };
    SandboxError::new(SandboxErrorKind::NoHelper { looked }, Some(hint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helper_is_looked_for_beside_the_executable_and_above_cargos_deps() {
        assert_eq!(
            candidates(Path::new("/usr/local/bin/cordon")),
            [PathBuf::from("/usr/local/bin/cordon-sandbox-init")]
        );
        assert_eq!(
            candidates(Path::new("/w/target/debug/deps/init-0123")),
            [
                PathBuf::from("/w/target/debug/deps/cordon-sandbox-init"),
                PathBuf::from("/w/target/debug/cordon-sandbox-init")
            ]
        );
    }
}
