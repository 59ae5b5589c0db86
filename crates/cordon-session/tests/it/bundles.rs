//! Bundles are hostile input: every check a bundle goes through before anything of it reaches
//! the host repository, against real bundles made by git (and unmade by hand).

use std::path::PathBuf;

use cordon_git::{CommitId, Repo};
use cordon_session::{SessionErrorKind, check_bundle_file, import_into_host};
use cordon_test_support::git;
use pretty_assertions::assert_eq;

/// A source repository (`main` with two commits, a tag, another branch) and a host that has
/// only the first commit.
struct Fixture {
    dir: tempfile::TempDir,
    base: CommitId,
    tip: CommitId,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        git(&src, &["init", "-q", "-b", "main"]);
        std::fs::write(src.join("a"), "a\n").unwrap();
        git(&src, &["add", "a"]);
        git(&src, &["commit", "-qm", "one"]);
        let base = CommitId::parse(git(&src, &["rev-parse", "HEAD"]).trim()).unwrap();
        git(
            &src,
            &[
                "clone",
                "-q",
                src.to_str().unwrap(),
                dir.path().join("host").to_str().unwrap(),
            ],
        );
        std::fs::write(src.join("b"), "b\n").unwrap();
        git(&src, &["add", "b"]);
        git(&src, &["commit", "-qm", "two"]);
        git(&src, &["tag", "v1"]);
        git(&src, &["branch", "other"]);
        let tip = CommitId::parse(git(&src, &["rev-parse", "HEAD"]).trim()).unwrap();
        Fixture { dir, base, tip }
    }

    fn src(&self) -> PathBuf {
        self.dir.path().join("src")
    }

    fn host(&self) -> Repo {
        Repo::open(&self.dir.path().join("host")).unwrap()
    }

    fn host_refs(&self) -> String {
        git(&self.dir.path().join("host"), &["for-each-ref"])
    }

    /// `git bundle create NAME REVS...` in the source repository.
    fn bundle(&self, name: &str, revs: &[&str]) -> PathBuf {
        let path = self.dir.path().join(name);
        let mut args = vec!["bundle", "create", "-q", path.to_str().unwrap()];
        args.extend_from_slice(revs);
        git(&self.src(), &args);
        path
    }

    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

#[track_caller]
fn assert_refused(result: Result<impl std::fmt::Debug, cordon_session::SessionError>, why: &str) {
    match result {
        Err(e) => match &e.kind {
            SessionErrorKind::BundleRefused(message) => {
                assert!(message.contains(why), "expected {why:?} in {message:?}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        },
        Ok(value) => panic!("expected a refusal, got {value:?}"),
    }
}

const MAIN: &str = "refs/heads/main";
const LIMIT: u64 = 1 << 30;

#[test]
fn a_good_bundle_passes_every_check_and_imports_into_cordons_ref_only() {
    let f = Fixture::new();
    let bundle = f.bundle("good.bundle", &["main", &format!("^{}", f.base)]);
    let header = check_bundle_file(&bundle, MAIN, Some(&f.tip), LIMIT).unwrap();
    assert_eq!(header.prerequisites, vec![f.base.clone()]);
    let before_main = f.host().ref_commit(MAIN).unwrap();
    import_into_host(&f.host(), &bundle, MAIN, "refs/cordon/sessions/abcd2345").unwrap();
    assert_eq!(
        f.host()
            .ref_commit("refs/cordon/sessions/abcd2345")
            .unwrap(),
        Some(f.tip.clone())
    );
    assert_eq!(f.host().ref_commit(MAIN).unwrap(), before_main);
    assert_eq!(f.host().ref_commit("refs/tags/v1").unwrap(), None);
}

#[test]
fn not_a_bundle_or_a_cut_one_is_refused() {
    let f = Fixture::new();
    let text = f.write("text.bundle", b"#!/bin/sh\nrm -rf /\n");
    assert_refused(
        check_bundle_file(&text, MAIN, None, LIMIT),
        "git bundle signature",
    );
    let good = std::fs::read(f.bundle("good.bundle", &["main"])).unwrap();
    let header_end = good.windows(2).position(|w| w == b"\n\n").unwrap();
    let cut = f.write("cut.bundle", &good[..header_end]);
    assert_refused(check_bundle_file(&cut, MAIN, None, LIMIT), "does not end");
    let no_pack = f.write("nopack.bundle", &good[..header_end + 2]);
    assert_refused(check_bundle_file(&no_pack, MAIN, None, LIMIT), "no pack");
    let empty = f.write("empty.bundle", b"");
    assert_refused(check_bundle_file(&empty, MAIN, None, LIMIT), "signature");
}

#[test]
fn extra_refs_tags_and_refs_outside_refs_heads_are_refused() {
    let f = Fixture::new();
    let extra = f.bundle("extra.bundle", &["main", "other"]);
    assert_refused(
        check_bundle_file(&extra, MAIN, None, LIMIT),
        "exactly the ref",
    );
    let tags = f.bundle("tags.bundle", &["main", "v1"]);
    assert_refused(check_bundle_file(&tags, MAIN, None, LIMIT), "refs/tags/v1");
    let tag_only = f.bundle("tag.bundle", &["v1"]);
    assert_refused(
        check_bundle_file(&tag_only, MAIN, None, LIMIT),
        "exactly the ref",
    );
    assert_refused(
        check_bundle_file(&tag_only, "refs/tags/v1", None, LIMIT),
        "not a branch",
    );
    let head = f.bundle("head.bundle", &["HEAD"]);
    assert_refused(check_bundle_file(&head, MAIN, None, LIMIT), "[\"HEAD\"]");
    // A ref in the header that is not the one expected, however it is named.
    let good = std::fs::read(f.bundle("good.bundle", &["main"])).unwrap();
    let forged = String::from_utf8_lossy(&good).replacen(MAIN, "refs/heads/../../x", 1);
    let forged = f.write("forged.bundle", &forged.into_bytes());
    assert_refused(
        check_bundle_file(&forged, MAIN, None, LIMIT),
        "exactly the ref",
    );
}

#[test]
fn the_wrong_tip_a_symlink_and_a_bundle_over_the_limit_are_refused() {
    let f = Fixture::new();
    let bundle = f.bundle("good.bundle", &["main"]);
    assert_refused(
        check_bundle_file(&bundle, MAIN, Some(&f.base), LIMIT),
        "expected",
    );
    let size = bundle.metadata().unwrap().len();
    assert_refused(
        check_bundle_file(&bundle, MAIN, None, size - 1),
        "--max-bundle",
    );
    check_bundle_file(&bundle, MAIN, None, size).unwrap();
    let link = f.dir.path().join("link.bundle");
    std::os::unix::fs::symlink(&bundle, &link).unwrap();
    assert_refused(
        check_bundle_file(&link, MAIN, None, LIMIT),
        "not a regular file",
    );
}

#[test]
fn missing_prerequisites_are_refused_and_nothing_changes() {
    let f = Fixture::new();
    // A third commit, bundled against the second: the host has only the first.
    std::fs::write(f.src().join("c"), "c\n").unwrap();
    git(&f.src(), &["add", "c"]);
    git(&f.src(), &["commit", "-qm", "three"]);
    let bundle = f.bundle("thin.bundle", &["main", "^HEAD~1"]);
    check_bundle_file(&bundle, MAIN, None, LIMIT).unwrap();
    let before = f.host_refs();
    assert_refused(
        import_into_host(&f.host(), &bundle, MAIN, "refs/cordon/sessions/abcd2345"),
        "git bundle verify",
    );
    assert_eq!(f.host_refs(), before);
}

#[test]
fn corrupt_pack_data_is_refused_and_nothing_changes() {
    let f = Fixture::new();
    let mut bytes =
        std::fs::read(f.bundle("good.bundle", &["main", &format!("^{}", f.base)])).unwrap();
    let pack = bytes.windows(4).position(|w| w == b"PACK").unwrap();
    // Keep the pack header (signature, version, count); garble the objects.
    for byte in &mut bytes[pack + 12..] {
        *byte ^= 0x5a;
    }
    let corrupt = f.write("corrupt.bundle", &bytes);
    check_bundle_file(&corrupt, MAIN, None, LIMIT).unwrap();
    let before = f.host_refs();
    assert_refused(
        import_into_host(&f.host(), &corrupt, MAIN, "refs/cordon/sessions/abcd2345"),
        "",
    );
    assert_eq!(f.host_refs(), before);
}

#[test]
fn objects_that_fail_fsck_are_refused_on_import() {
    let f = Fixture::new();
    let tree = git(&f.src(), &["rev-parse", "HEAD^{tree}"]);
    let bad_commit = format!(
        "tree {}\nparent {}\nauthor no email here 1 +0000\ncommitter c <c@c> 1 +0000\n\nbad\n",
        tree.trim(),
        f.tip
    );
    let hash_path = f.write("commit.txt", bad_commit.as_bytes());
    let id = git(
        &f.src(),
        &[
            "hash-object",
            "-w",
            "-t",
            "commit",
            "--literally",
            hash_path.to_str().unwrap(),
        ],
    );
    git(&f.src(), &["update-ref", MAIN, id.trim()]);
    let bundle = f.bundle("fsck.bundle", &["main", &format!("^{}", f.base)]);
    check_bundle_file(&bundle, MAIN, None, LIMIT).unwrap();
    let before = f.host_refs();
    assert_refused(
        import_into_host(&f.host(), &bundle, MAIN, "refs/cordon/sessions/abcd2345"),
        "missingEmail",
    );
    assert_eq!(f.host_refs(), before);
}
