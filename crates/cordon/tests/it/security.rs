//! Regressions of the adversarial review (issue 19): each test reproduces an attack through
//! the real CLI and checks that the guarantee holds.

use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::{TestDir, cordon, git};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A repository with one commit, and a persistent workspace of it.
struct Workspace {
    repo: TestDir,
    home: TestDir,
    id: String,
    tree: std::path::PathBuf,
}

impl Workspace {
    fn new(files: &[(&str, &str)]) -> Workspace {
        let repo = TestDir::new();
        let home = TestDir::new();
        git(repo.path(), &["init", "-q", "-b", "main"]);
        repo.write("a.txt", "alpha\n");
        for (name, contents) in files {
            let path = repo.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, contents).unwrap();
        }
        git(repo.path(), &["add", "-A"]);
        git(repo.path(), &["commit", "-qm", "init"]);
        let out = cordon()
            .env("CORDON_HOME", home.path())
            // These cases race the host-visible tree of a git worktree; an overlay's tree
            // exists only inside the sandbox (workspace_cli.rs covers overlays).
            .args(["workspace", "create", "--persistent", "--json"])
            .args(["--strategy", "git-worktree", "--repo"])
            .arg(repo.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        Workspace {
            id: record["id"].as_str().unwrap().to_owned(),
            tree: record["path"].as_str().unwrap().into(),
            repo,
            home,
        }
    }

    fn run(&self, extra: &[&str], script: &str) -> Output {
        cordon()
            .env("CORDON_HOME", self.home.path())
            .args(["run", "--no-record", "--workspace", &self.id])
            .args(extra)
            .args(["--", "sh", "-c", script])
            .output()
            .unwrap()
    }
}

/// Swaps `a` and `b` atomically (`renameat2(RENAME_EXCHANGE)`).
fn exchange(a: &Path, b: &Path) {
    let (a, b) = (
        std::ffi::CString::new(a.as_os_str().as_encoded_bytes()).unwrap(),
        std::ffi::CString::new(b.as_os_str().as_encoded_bytes()).unwrap(),
    );
    // SAFETY: two valid NUL-terminated paths.
    unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        );
    }
}

/// Item 1. Regression: while a subdirectory of the workspace was swapped with a symlink in a
/// loop, `cordon run --cwd <tree>/sub` bound the symlink's target — a host directory outside
/// the workspace — read-write (10 of 80 tries). The path was checked, then followed again at
/// mount time. Now what is bound is what was checked, or the run is refused.
#[test]
fn a_bind_source_swapped_for_a_symlink_is_never_followed() {
    let ws = Workspace::new(&[("sub/keep", "x\n")]);
    let outside = TestDir::new();
    let link = ws.tree.join("link");
    std::os::unix::fs::symlink(outside.path(), &link).unwrap();
    let sub = ws.tree.join("sub");
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, sub, link) = (Arc::clone(&stop), sub.clone(), link.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                exchange(&sub, &link);
                swaps += 1;
            }
            swaps
        })
    };
    let (mut ran, mut refused) = (0, 0);
    for _ in 0..80 {
        let out = ws.run(
            &["--cwd", sub.to_str().unwrap()],
            "echo escaped > ./escaped-$$ 2>/dev/null; true",
        );
        match out.status.code() {
            Some(0) => ran += 1,
            // Refused before the sandbox (a working directory outside the workspace: usage,
            // 2) or by the helper setting it up (cordon failed, 125).
            Some(2 | 125) => refused += 1,
            other => panic!("unexpected exit {other:?}: {}", stderr(&out)),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    // The swap ends with an even count: put things back if needed.
    if sub.is_symlink() {
        exchange(&sub, &link);
    }
    let leaked: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leaked,
        Vec::<std::ffi::OsString>::new(),
        "a host directory outside the workspace was written ({ran} ran, {refused} refused, {swaps} swaps)"
    );
    assert!(ran + refused == 80);
}

/// Item 15. Regression: the sandbox's `/tmp`, home and `/dev/shm` accepted up to half the RAM
/// each. They now have sizes (2 GiB, 1 GiB, 512 MiB by default; `--tmp-size`), and an inode
/// limit.
#[test]
fn private_tmpfs_mounts_have_size_and_inode_limits() {
    let dir = TestDir::new();
    let sizes = "for d in /tmp $HOME /dev/shm; do stat -f -c '%b %S %c' $d; done";
    let out = cordon()
        .args(["run", "--no-record", "--cwd"])
        .arg(dir.path())
        .args(["--", "sh", "-c", sizes])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let bytes: Vec<(u64, u64)> = text
        .lines()
        .map(|l| {
            let v: Vec<u64> = l.split(' ').map(|w| w.parse().unwrap()).collect();
            (v[0] * v[1], v[2])
        })
        .collect();
    assert_eq!(
        bytes.iter().map(|b| b.0).collect::<Vec<_>>(),
        [2 << 30, 1 << 30, 512 << 20],
        "{text}"
    );
    assert!(
        bytes.iter().all(|b| b.1 > 0 && b.1 <= (2 << 30) / 4096),
        "{text}"
    );

    let fill = "head -c 20000000 /dev/zero > /tmp/big && echo FITS; \
                i=0; while [ $i -lt 3000 ]; do touch /tmp/f$i 2>/dev/null || { echo INODES-FULL; break; }; i=$((i+1)); done";
    let out = cordon()
        .args(["run", "--no-record", "--tmp-size", "8MiB", "--cwd"])
        .arg(dir.path())
        .args(["--", "sh", "-c", fill])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        !shown.contains("FITS"),
        "20 MB fit into an 8 MiB /tmp: {shown}"
    );
    assert!(
        shown.contains("INODES-FULL"),
        "2048 inodes at most: {shown}"
    );
    assert!(
        stderr(&out).contains("No space left on device"),
        "{}",
        stderr(&out)
    );
}

/// The host's cargo registry, where a dependency's sources live (the test machine built this
/// test with cargo, so it exists).
fn cargo_registry() -> std::path::PathBuf {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo")
        });
    cargo_home.join("registry")
}

/// Item 2. Regression: a setup stage (patch-controlled code: build scripts, install hooks,
/// a `rustc-wrapper`) ran with the host's `$CARGO_HOME/registry` writable and rewrote a
/// dependency there; the user's next own build ran it. Setup stages now write into a private
/// layer of the verification: later stages of the same verification see it (read-only), the
/// host's cache never does, and neither does the next verification when the writer was a
/// candidate (here the checkout's uncommitted change: what an agent's patch is). Only a
/// trusted build (a commit of the default branch, nothing more) keeps its layer for the next.
#[test]
fn setup_stages_never_write_the_hosts_dependency_caches() {
    let registry = cargo_registry();
    assert!(registry.is_dir(), "{} must exist", registry.display());
    let marker = format!("cordon-poison-{}", std::process::id());
    let host_marker = registry.join(&marker);
    let config = format!(
        r#"
[[stage]]
name = "setup"
category = "setup"
writable_caches = true
run = ["sh", "-c", "test -d \"$CARGO_HOME/registry/index\" && echo HOST-CONTENT-VISIBLE; test -e \"$CARGO_HOME/registry/{marker}\" && echo ALREADY-THERE; echo poison > \"$CARGO_HOME/registry/{marker}\" && echo WROTE"]

[[stage]]
name = "build"
category = "build"
run = ["sh", "-c", "cat \"$CARGO_HOME/registry/{marker}\"; echo again > \"$CARGO_HOME/registry/{marker}\" 2>/dev/null && echo BUILD-WROTE; true"]
"#
    );
    let ws = Workspace::new(&[("cordon.toml", &config)]);
    std::fs::write(
        ws.repo.path().join("candidate.txt"),
        "an uncommitted change\n",
    )
    .unwrap();
    let verify = || {
        let out = cordon()
            .env("CORDON_HOME", ws.home.path())
            .args(["verify", "--json", "--no-record", "--repo"])
            .arg(ws.repo.path())
            .output()
            .unwrap();
        let report: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
        // Checked, then cleaned up at once: a regression must not poison the host for long.
        let leaked = host_marker.exists();
        let _ = std::fs::remove_file(&host_marker);
        (report, leaked)
    };
    let (first, leaked) = verify();
    let stdout = |report: &serde_json::Value, i: usize| {
        report["stages"][i]["stdout"]["head"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(first["overall"], "pass", "{first:#}");
    assert!(stdout(&first, 0).contains("WROTE"), "{first:#}");
    // Through an overlay: the host's cache is there underneath (where overlayfs works, as on
    // the machines cordon is tested on; elsewhere the layer is an empty private cache).
    assert!(
        stdout(&first, 0).contains("HOST-CONTENT-VISIBLE") || !registry.join("index").is_dir(),
        "{first:#}"
    );
    assert!(!stdout(&first, 0).contains("ALREADY-THERE"), "{first:#}");
    assert!(
        stdout(&first, 1).contains("poison"),
        "later stages see it: {first:#}"
    );
    assert!(
        !stdout(&first, 1).contains("BUILD-WROTE"),
        "read-only there: {first:#}"
    );
    assert!(!leaked, "the host's registry was written");
    assert_eq!(
        first["cache"]["promoted"],
        serde_json::Value::Null,
        "{first:#}"
    );
    let (second, leaked) = verify();
    assert!(
        !stdout(&second, 0).contains("ALREADY-THERE"),
        "the next verification saw the poison: {second:#}"
    );
    assert!(!leaked);
}

/// Item 14. Regression: a stage that made 30,000 nested directories ran cleanup out of file
/// descriptors: exit 3, the report lost, the workspace left behind and `gc` failing too. Now
/// the tree is removed with a constant number of descriptors, and a cleanup failure would be a
/// warning in the report, never its loss. (6,000 levels are far past any descriptor limit; the
/// 30,000 of the review cost a minute of Landlock's per-access walk up the tree to make.)
#[test]
fn a_deep_tree_made_by_a_stage_is_removed_and_the_report_kept() {
    let config = r#"
[[stage]]
name = "deep"
category = "test"
run = ["python3", "-c", "import os\nfor _ in range(6000):\n    os.mkdir('d')\n    os.chdir('d')\nopen('leaf', 'w').write('x')\nos.chmod('.', 0)\nprint('DEEP-DONE')"]
"#;
    let ws = Workspace::new(&[("cordon.toml", config)]);
    let out = cordon()
        .env("CORDON_HOME", ws.home.path())
        .args(["verify", "--json", "--no-record", "--repo"])
        .arg(ws.repo.path())
        .output()
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(report["overall"], "pass", "{report:#}");
    assert!(
        report["stages"][0]["stdout"]["head"]
            .as_str()
            .unwrap_or_default()
            .contains("DEEP-DONE"),
        "{report:#}"
    );
    // The transient workspace is gone: only the persistent one made by the fixture is left.
    let list = cordon()
        .env("CORDON_HOME", ws.home.path())
        .args(["workspace", "list", "--json"])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let ids: Vec<&str> = listed["workspaces"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed:#}"))
        .iter()
        .filter_map(|w| w["record"]["id"].as_str())
        .collect();
    assert_eq!(ids, vec![ws.id.as_str()], "{listed:#}");
    let gc = cordon()
        .env("CORDON_HOME", ws.home.path())
        .args(["gc", "--json"])
        .output()
        .unwrap();
    assert!(gc.status.success(), "{}", stderr(&gc));
}

/// Item 3. Regression: with `ready = { tcp = P }`, a server that never listened passed when a
/// host process listened on P (the probe read the outer helper's — the host's — table). Now a
/// socket counts only when the stage's own tree holds it, with or without the host's network.
#[test]
fn a_smoke_stage_is_not_ready_because_a_host_process_listens() {
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let config = format!(
        r#"
[[stage]]
name = "private"
category = "smoke"
run = ["sleep", "60"]
ready = {{ tcp = {port} }}
timeout = "3s"
required = false

[[stage]]
name = "hostnet"
category = "smoke"
network = "host"
run = ["sleep", "60"]
ready = {{ tcp = {port} }}
timeout = "3s"
required = false

[[stage]]
name = "real"
category = "smoke"
run = ["python3", "-m", "http.server", "--bind", "127.0.0.1", "{port}"]
ready = {{ tcp = {port} }}
timeout = "20s"
"#
    );
    let ws = Workspace::new(&[("cordon.toml", &config)]);
    let out = cordon()
        .env("CORDON_HOME", ws.home.path())
        .args(["verify", "--json", "--no-record", "--repo"])
        .arg(ws.repo.path())
        .output()
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    let status = |i: usize| report["stages"][i]["status"].as_str().unwrap_or_default();
    assert_eq!(status(0), "fail", "{report:#}");
    assert_eq!(status(1), "fail", "{report:#}");
    assert_eq!(
        report["stages"][1]["failure"]["category"], "smoke",
        "{report:#}"
    );
    // A server in the sandbox's own network namespace on the same port is ready.
    assert_eq!(status(2), "pass", "{report:#}");
    drop(host);
}

/// Item 9. Regression: with `--ref BRANCH`, the branch's own `cordon.toml` decided its checks
/// (`run = ["true"]`). Now the base's plan judges a ref that changed it, unless the user passes
/// `--trust-ref-plan`; a ref that adds a plan its base lacks is refused; the report says which
/// plan ran and why.
#[test]
fn a_candidate_ref_does_not_choose_its_own_checks() {
    let strict = "[[stage]]\nname = \"checks\"\ncategory = \"test\"\nrun = [\"sh\", \"-c\", \"test -e proof\"]\n";
    let ws = Workspace::new(&[("cordon.toml", strict)]);
    let repo = ws.repo.path();
    git(repo, &["checkout", "-qb", "evil"]);
    ws.repo.write(
        "cordon.toml",
        "[[stage]]\nname = \"checks\"\ncategory = \"test\"\nrun = [\"true\"]\n",
    );
    git(repo, &["commit", "-qam", "lenient checks"]);
    git(repo, &["checkout", "-q", "main"]);
    let verify = |extra: &[&str]| {
        let out = cordon()
            .env("CORDON_HOME", ws.home.path())
            .args(["verify", "--json", "--no-record", "--ref", "evil", "--repo"])
            .arg(repo)
            .args(extra)
            .output()
            .unwrap();
        let report: Option<serde_json::Value> = serde_json::from_slice(&out.stdout).ok();
        (report, out)
    };
    let (report, out) = verify(&[]);
    let report = report.unwrap_or_else(|| panic!("{}", stderr(&out)));
    assert_eq!(out.status.code(), Some(1), "{report:#}");
    assert_eq!(report["plan"]["origin"], "base", "{report:#}");
    assert!(
        report["plan"]["reasons"][0]
            .as_str()
            .unwrap()
            .contains("--trust-ref-plan"),
        "{report:#}"
    );
    let (report, out) = verify(&["--trust-ref-plan"]);
    let report = report.unwrap_or_else(|| panic!("{}", stderr(&out)));
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(report["plan"]["origin"], "ref", "{report:#}");

    // A ref that adds a cordon.toml where its base has none is refused.
    git(repo, &["checkout", "-qb", "bare", "main"]);
    git(repo, &["rm", "-q", "cordon.toml"]);
    ws.repo.write("pyproject.toml", "[project]\nname = \"x\"\n");
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-qm", "no plan"]);
    git(repo, &["checkout", "-qb", "adds", "bare"]);
    ws.repo.write(
        "cordon.toml",
        "[[stage]]\nname = \"t\"\ncategory = \"test\"\nrun = [\"true\"]\n",
    );
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-qm", "own plan"]);
    let out = cordon()
        .env("CORDON_HOME", ws.home.path())
        .args([
            "verify",
            "--no-record",
            "--ref",
            "adds",
            "--base",
            "bare",
            "--repo",
        ])
        .arg(repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--trust-ref-plan"),
        "{}",
        stderr(&out)
    );
}

/// Items 6 and 7. Regression: a plain `cordon run` in a repository left `.git` writable (a
/// program planted a hook or `core.fsmonitor`, and the user's next `git status` ran it), and a
/// run in a workspace could point the workspace's `.git` file at a repository it made. The
/// git data at the top of a writable tree is now read-only unless bound with `--rw`; the result
/// lists it; a working directory that holds the home directory is warned about.
#[test]
fn git_data_under_the_working_directory_stays_read_only() {
    let ws = Workspace::new(&[]);
    let repo = ws.repo.path();
    let config_before = std::fs::read(repo.join(".git/config")).unwrap();
    let attack = "git config core.fsmonitor 'touch /tmp/pwned' 2>/dev/null && echo CONFIG-WRITTEN; \
                  echo evil > .git/hooks/post-checkout 2>/dev/null && echo HOOK-WRITTEN; \
                  mv .git .git-moved 2>/dev/null && echo MOVED; \
                  echo tree > ok.txt && echo TREE-WRITTEN";
    let run = |dir: &Path, extra: &[&str]| {
        let out = cordon()
            .env("CORDON_HOME", ws.home.path())
            .current_dir(dir)
            .args(["run", "--no-record", "--json"])
            .args(extra)
            .args(["--", "sh", "-c", attack])
            .output()
            .unwrap();
        let result: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
        (
            result["stdout"]["head"].as_str().unwrap().to_owned(),
            result,
        )
    };
    let (said, result) = run(repo, &[]);
    assert_eq!(said, "TREE-WRITTEN\n", "{result:#}");
    assert_eq!(
        std::fs::read(repo.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!repo.join(".git/hooks/post-checkout").exists());
    assert_eq!(
        result["sandbox"]["read_only_git"][0],
        repo.canonicalize().unwrap().join(".git").to_str().unwrap(),
        "{result:#}"
    );
    // The user may opt in.
    let (said, result) = run(repo, &["--rw", ".git"]);
    assert!(said.contains("HOOK-WRITTEN"), "{result:#}");

    // A workspace's `.git` file cannot be pointed elsewhere.
    let pointer_before = std::fs::read(ws.tree.join(".git")).unwrap();
    let out = ws.run(
        &[],
        "echo 'gitdir: /tmp/evil' > .git 2>/dev/null && echo POINTER-WRITTEN; rm -f .git 2>/dev/null && echo REMOVED; echo RAN",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "RAN\n",
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(ws.tree.join(".git")).unwrap(), pointer_before);

    // A working directory that holds the home directory is warned about.
    let home = TestDir::new();
    let out = cordon()
        .env("CORDON_HOME", ws.home.path())
        .env("HOME", home.path())
        .current_dir(home.path())
        .args(["run", "--no-record", "--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("holds your home directory"),
        "{}",
        stderr(&out)
    );
}

/// Item 13. Regression: a stage read the repository's credentials and stash
/// (`http.<url>.extraheader`, a token in a remote URL, `git stash show -p`). The sandbox now
/// sees a sanitised configuration, no `refs/stash` and no reflogs — in a workspace and in a
/// plain run in the repository alike — while git itself still works there.
#[test]
fn the_sandbox_sees_no_git_credentials_or_stash() {
    let ws = Workspace::new(&[]);
    let repo = ws.repo.path();
    git(
        repo,
        &[
            "remote",
            "add",
            "origin",
            "https://bot:ghp_TOKEN_IN_URL@example.org/r.git",
        ],
    );
    git(
        repo,
        &[
            "config",
            "http.https://example.org/.extraheader",
            "AUTHORIZATION: basic SECRET_HEADER",
        ],
    );
    std::fs::write(repo.join("a.txt"), "STASHED_SECRET\n").unwrap();
    git(repo, &["stash", "-q"]);
    let probe = "cat \"$(git rev-parse --git-common-dir)/config\"; \
                 git config --get remote.origin.url; \
                 git stash list; git stash show -p 2>&1; \
                 git log --oneline -1 >/dev/null && echo LOG-WORKS; \
                 ls \"$(git rev-parse --git-common-dir)/logs\" 2>&1 | head -3; \
                 grep -r STASHED_SECRET \"$(git rev-parse --git-common-dir)/logs\" 2>/dev/null; \
                 echo END";
    let plain = cordon()
        .env("CORDON_HOME", ws.home.path())
        .current_dir(repo)
        .args(["run", "--no-record", "--", "sh", "-c", probe])
        .output()
        .unwrap();
    let in_workspace = ws.run(&[], probe);
    for out in [plain, in_workspace] {
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(said.ends_with("END\n"), "{said}\n{}", stderr(&out));
        assert!(said.contains("LOG-WORKS"), "{said}\n{}", stderr(&out));
        assert!(
            said.contains("https://example.org/r.git"),
            "the remote is still there, without its token: {said}"
        );
        for secret in ["TOKEN_IN_URL", "SECRET_HEADER", "STASHED_SECRET", "WIP on"] {
            assert!(!said.contains(secret), "{secret} leaked: {said}");
        }
    }
    // The host's repository is untouched: its stash and configuration are all there.
    assert!(git(repo, &["stash", "list"]).contains("WIP on"));
    assert!(git(repo, &["config", "--get", "remote.origin.url"]).contains("TOKEN_IN_URL"));
}

/// Item 5. Regression: `--allow-exec /bin/sh` ran python3 through the dynamic loader
/// (`ld.so /usr/bin/python3`: Landlock checks `execve`, not `mmap(PROT_EXEC)`), and could
/// have run a program the sandbox wrote. Under `--allow-exec` the program directories and
/// every writable place are now `noexec`; the allowed programs, and the libraries they map,
/// still run.
#[test]
fn the_dynamic_loader_cannot_start_what_allow_exec_does_not_name() {
    let dir = TestDir::new();
    let loader = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("a dynamic loader at a known path");
    let script = format!(
        "{loader} /usr/bin/python3 -c 'print(\"PYTHON-RAN\")' 2>/dev/null; \
         {loader} ./copied 2>/dev/null && echo COPY-RAN; \
         {loader} /bin/true 2>/dev/null && echo TRUE-RAN; \
         echo END"
    );
    // A program in the writable working directory (as a patch could add one).
    std::fs::copy("/bin/true", dir.path().join("copied")).unwrap();
    let out = cordon()
        .current_dir(dir.path())
        .args([
            "run",
            "--no-record",
            "--allow-exec",
            "/bin/sh",
            "--",
            "sh",
            "-c",
        ])
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "END\n",
        "{}",
        stderr(&out)
    );
    // Allowed programs run, with the shared libraries and extension modules they load.
    let out = cordon()
        .current_dir(dir.path())
        .args([
            "run",
            "--no-record",
            "--allow-exec",
            "/usr/bin/python3",
            "--",
        ])
        .args(["python3", "-c", "import ctypes, json; print('ALLOWED-RAN')"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ALLOWED-RAN\n",
        "{}",
        stderr(&out)
    );
}

/// Round three, V1. Regression: with `--allow-exec`, an allowed interpreter wrote a program
/// into a memfd (writable, not on a `noexec` mount) and had the dynamic loader map it from
/// `/proc/self/fd`. Now only files may be mapped executable (memfds, anonymous executable
/// memory and `SHM_EXEC` are refused) and every writable place is `noexec`: each route below
/// fails, and the program it tried to run never prints.
#[test]
fn allow_exec_cannot_be_bypassed_through_memory_or_writable_places() {
    let dir = TestDir::new();
    let loader = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("a dynamic loader at a known path");
    // The payload: a copy of `id`, in the writable working directory (as a patch could add).
    std::fs::copy("/usr/bin/id", dir.path().join("myid")).unwrap();
    let python = format!(
        r#"
import mmap, os, shutil, subprocess
LOADER = "{loader}"
payload = open("./myid", "rb").read()
def attempt(name, argv=None, fn=None):
    try:
        if fn is not None:
            fn()
        else:
            out = subprocess.run(argv, capture_output=True)
            if b"uid=" in out.stdout:
                print("RAN", name)
                return
        print("refused", name)
    except OSError as e:
        print("refused", name)
def memfd():
    fd = os.memfd_create("payload", 0)
    os.write(fd, payload)
    out = subprocess.run([LOADER, f"/proc/self/fd/{{fd}}"], pass_fds=[fd], capture_output=True)
    if b"uid=" in out.stdout:
        print("RAN memfd")
        raise SystemExit
    raise OSError("not run")
attempt("memfd", fn=memfd)
shutil.copy("./myid", "/dev/shm/myid")
attempt("dev-shm", [LOADER, "/dev/shm/myid"])
attempt("workdir", [LOADER, "./myid"])
def deleted():
    fd = os.open("./gone", os.O_RDWR | os.O_CREAT, 0o755)
    os.write(fd, payload)
    os.unlink("./gone")
    out = subprocess.run([LOADER, f"/proc/self/fd/{{fd}}"], pass_fds=[fd], capture_output=True)
    if b"uid=" in out.stdout:
        print("RAN deleted")
        raise SystemExit
    raise OSError("not run")
attempt("deleted", fn=deleted)
attempt("anonymous-exec", fn=lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC))
attempt("proc-self-mem", fn=lambda: open("/proc/self/mem", "r+b"))
print("END")
"#
    );
    let run = |extra: &[&str], program: &[&str]| {
        cordon()
            .current_dir(dir.path())
            .args(["run", "--no-record", "--allow-exec", "/usr/bin/python3"])
            .args(extra)
            .arg("--")
            .args(program)
            .output()
            .unwrap()
    };
    let out = run(&[], &["python3", "-c", &python]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "refused memfd\nrefused dev-shm\nrefused workdir\nrefused deleted\n\
         refused anonymous-exec\nrefused proc-self-mem\nEND\n",
        "{}",
        stderr(&out)
    );
    // A JIT needs anonymous executable memory: `--allow-jit` gives it (and says so in its
    // help: the program can then run code it makes); files in writable places stay noexec.
    let jit = "import mmap, subprocess\n\
               m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n\
               print('JIT-MEMORY')\n";
    let out = run(&["--allow-jit"], &["python3", "-c", jit]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "JIT-MEMORY\n",
        "{}",
        stderr(&out)
    );
    // perl's route: memfd_create through `syscall`, then the loader (perl allowed).
    if Path::new("/usr/bin/perl").exists() {
        let perl = format!(
            r#"my $name = "payload"; my $fd = syscall(319, $name, 0); if ($fd < 0) {{ print "refused memfd\n"; exit 0 }}
               open(my $in, "<", "./myid"); local $/; my $b = <$in>;
               open(my $out, ">&=", $fd); binmode $out; print $out $b; close $out;
               exec("{loader}", "/proc/self/fd/$fd");"#
        );
        let out = cordon()
            .current_dir(dir.path())
            .args(["run", "--no-record", "--allow-exec", "/usr/bin/perl", "--"])
            .args(["perl", "-e", &perl])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "refused memfd\n",
            "{}",
            stderr(&out)
        );
    }
    // node's route (node allowed, run without its JIT as --allow-exec requires): the payload
    // copied to /dev/shm and to the working directory, started through the loader.
    if let Some(node) = ["/usr/bin/node", "/usr/local/bin/node"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    {
        let js = format!(
            r#"const fs = require("fs"), cp = require("child_process");
               fs.copyFileSync("./myid", "/dev/shm/n");
               for (const p of ["/dev/shm/n", "./myid"]) {{
                 const r = cp.spawnSync("{loader}", [p]);
                 console.log(String(r.stdout).includes("uid=") ? "RAN " + p : "refused " + p);
               }}"#
        );
        let out = cordon()
            .current_dir(dir.path())
            .args(["run", "--no-record", "--allow-exec", node, "--"])
            .args([node, "--jitless", "-e", &js])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "refused /dev/shm/n\nrefused ./myid\n",
            "{}",
            stderr(&out)
        );
    }
}

/// Item 15 (disk). Regression: the working tree had no quota. A tree that grows past `--disk`
/// now ends the program, reported as a `disk` limit hit (every other test runs within the
/// default 10 GiB undisturbed).
#[test]
fn a_tree_that_grows_past_the_disk_limit_is_stopped() {
    let dir = TestDir::new();
    let run = |limit: &str| {
        let out = cordon()
            .current_dir(dir.path())
            .args([
                "run",
                "--no-record",
                "--json",
                "--timeout",
                "60s",
                "--disk",
                limit,
            ])
            .args([
                "--",
                "sh",
                "-c",
                "head -c 40000000 /dev/zero > big && echo WROTE; \
                 while :; do sleep 1; done",
            ])
            .output()
            .unwrap();
        let result: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
        let _ = std::fs::remove_file(dir.path().join("big"));
        result
    };
    let result = run("8MiB");
    assert_eq!(
        result["limits_hit"],
        serde_json::json!(["disk"]),
        "{result:#}"
    );
    assert_eq!(result["failure"]["category"], "resource", "{result:#}");
    assert!(
        result["failure"]["reason"]
            .as_str()
            .unwrap()
            .contains("disk limit"),
        "{result:#}"
    );
    // "Does not hang": ended long before the timeout.
    assert!(
        result["duration_ms"].as_u64().unwrap() < 50_000,
        "{result:#}"
    );
}

/// Item 8. Regression: `workspace remove` (and `gc`) fell back to `git worktree prune` and
/// deleted the user's own `.git/worktrees/<name>` entry, whose directory was on an unmounted
/// disk. cordon now forgets only its own workspaces' entries.
#[test]
fn removing_workspaces_never_forgets_the_users_own_worktrees() {
    let ws = Workspace::new(&[]);
    let repo = ws.repo.path();
    let disk = TestDir::new();
    let own = disk.path().join("own-worktree");
    git(repo, &["worktree", "add", "-q", own.to_str().unwrap()]);
    let entry = repo.join(".git/worktrees/own-worktree");
    assert!(entry.is_dir());
    // The disk is "unmounted": the worktree's directory is gone for now.
    let away = disk.path().join("away");
    std::fs::rename(&own, &away).unwrap();
    let cli = |args: &[&str]| {
        let out = cordon()
            .env("CORDON_HOME", ws.home.path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    cli(&["workspace", "remove", &ws.id]);
    cli(&["gc"]);
    assert!(entry.is_dir(), "the user's own worktree entry was deleted");
    // The disk comes back: git still knows the worktree.
    std::fs::rename(&away, &own).unwrap();
    assert!(git(repo, &["worktree", "list"]).contains("own-worktree"));
}
