//! A lint stage's findings compared with the base commit's: which are the change's own
//! (`new`) and which the base has too (`existing`).
//!
//! The base's findings come from, in order: the verification itself when nothing changed
//! against the base (every finding is the base's); a record a verification of the base commit
//! left (`$CORDON_HOME/baselines/<key>.json`, written when a lint stage ran on the base commit
//! itself, without changes); else a run of the same stage on the base commit, in a workspace of
//! its own (see `stage::run_on_base`). A finding is the base's when the base has one of the
//! same tool, code, file and message: line numbers are not compared (a change above it shifts
//! them), but among several such findings of one file each base finding matches one candidate
//! finding, the nearest after the shift of the previous match.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cordon_types::{Baseline, Finding};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::StageConfig;

cordon_types::schema_tag!(
    /// The `schema` tag of a recorded baseline: `"cordon.lint-baseline/v1"`.
    BaselineRecordTag,
    "cordon.lint-baseline/v1"
);

/// Most findings of one stage compared with the base's (the report keeps 50 of them).
pub(crate) const MAX_COMPARED: usize = 1000;

/// The findings of one stage on one commit (`baselines/<key>.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BaselineRecord {
    schema: BaselineRecordTag,
    /// The commit the stage ran on.
    pub(crate) commit: String,
    /// The stage.
    pub(crate) stage: String,
    /// Whether the stage failed there.
    pub(crate) fails: bool,
    /// Its findings (at most [`MAX_COMPARED`]).
    pub(crate) findings: Vec<Finding>,
    /// The text of the line each finding points at, when known.
    pub(crate) texts: Vec<Option<String>>,
    /// Whether findings beyond [`MAX_COMPARED`] were left out (then the record is not used:
    /// what it lacks could hide a new finding).
    pub(crate) complete: bool,
}

/// The base's findings of a stage, however they were known.
#[derive(Debug, Clone)]
pub(crate) struct BaseFindings {
    /// The base commit.
    pub(crate) commit: String,
    /// How they were known.
    pub(crate) source: cordon_types::BaselineSource,
    /// The findings with the text of the line each points at (for `Unchanged`: none, every
    /// finding is the base's).
    pub(crate) findings: Vec<(Finding, Option<String>)>,
    /// Whether the stage fails on the base.
    pub(crate) fails: bool,
    /// Why they could not be known (`Unavailable`).
    pub(crate) note: Option<String>,
}

impl BaseFindings {
    /// No comparison could be made, for `reason`: every finding counts as new.
    pub(crate) fn unavailable(commit: &str, reason: impl Into<String>) -> BaseFindings {
        BaseFindings {
            commit: commit.to_owned(),
            source: cordon_types::BaselineSource::Unavailable,
            findings: Vec::new(),
            fails: false,
            note: Some(reason.into()),
        }
    }
}

/// The recorded baselines under `$CORDON_HOME/baselines`.
#[derive(Debug, Clone)]
pub(crate) struct BaselineStore {
    dir: PathBuf,
    /// What a record's key holds besides the commit and the stage: the repository and the
    /// toolchains' versions (a new clippy finds new things).
    context: String,
}

impl BaselineStore {
    /// The store of `home` for the repository `common_dir` built with `toolchain`.
    pub(crate) fn new(home: &Path, common_dir: &Path, toolchain: &str) -> BaselineStore {
        BaselineStore {
            dir: home.join("baselines"),
            context: format!("{}\n{toolchain}", common_dir.display()),
        }
    }

    fn path(&self, commit: &str, stage: &StageConfig) -> PathBuf {
        let mut h = Sha256::new();
        for part in [
            self.context.as_bytes(),
            commit.as_bytes(),
            stage_digest(stage).as_bytes(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        let key: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{key}.json"))
    }

    /// The base's recorded findings of `stage` at `commit`, when a complete record exists.
    pub(crate) fn load(&self, commit: &str, stage: &StageConfig) -> Option<BaselineRecord> {
        let bytes = std::fs::read(self.path(commit, stage)).ok()?;
        let record: BaselineRecord = serde_json::from_slice(&bytes).ok()?;
        (record.complete && record.commit == commit && record.stage == stage.name).then_some(record)
    }

    /// Records the findings of `stage` on `commit` (a verification of the commit itself,
    /// without changes), replacing any earlier record. Written to a temporary file, then
    /// renamed: a reader never sees half a record.
    pub(crate) fn record(
        &self,
        commit: &str,
        stage: &StageConfig,
        fails: bool,
        findings: &[Finding],
        texts: &[Option<String>],
        complete: bool,
    ) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let record = BaselineRecord {
            schema: BaselineRecordTag,
            commit: commit.to_owned(),
            stage: stage.name.clone(),
            fails,
            findings: findings
                .iter()
                .map(|f| Finding {
                    baseline: None,
                    ..f.clone()
                })
                .collect(),
            texts: texts.to_vec(),
            complete,
        };
        let path = self.path(commit, stage);
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(
            &tmp,
            serde_json::to_vec(&record).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&tmp, &path)
    }
}

/// A digest of what decides a stage's findings: its name, argv, environment and directory.
fn stage_digest(stage: &StageConfig) -> String {
    let mut h = Sha256::new();
    h.update(stage.name.as_bytes());
    for a in &stage.run {
        h.update([1]);
        h.update(a.as_bytes());
    }
    for (k, v) in &stage.env {
        h.update([2]);
        h.update(k.as_bytes());
        h.update([3]);
        h.update(v.as_bytes());
    }
    if let Some(cwd) = &stage.cwd {
        h.update([4]);
        h.update(cwd.as_os_str().as_encoded_bytes());
    }
    // Whether the base failed depends on it.
    if stage.fail_on_warnings {
        h.update([5]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// What must be equal for a base finding to be a candidate's: tool, code, file, message, and
/// the text of the line it points at (when known).
type Key = (
    String,
    Option<String>,
    Option<String>,
    String,
    Option<String>,
);

fn key(f: &Finding, text: Option<&String>) -> Key {
    (
        f.tool.clone(),
        f.code.clone(),
        f.file.clone(),
        f.message.clone(),
        text.cloned(),
    )
}

/// Marks each of `findings` `new` or `existing` against the base's: a base finding of the
/// same key is the candidate's (each used once; among several, the nearest lines pair first).
/// `texts[i]` is the text of the line `findings[i]` points at, `base[j].1` that of the base's.
pub(crate) fn classify(
    findings: &mut [Finding],
    texts: &[Option<String>],
    base: &[(Finding, Option<String>)],
) {
    let mut groups: BTreeMap<Key, (Vec<usize>, Vec<Option<u32>>)> = BTreeMap::new();
    for (i, f) in findings.iter().enumerate() {
        let text = texts.get(i).and_then(Option::as_ref);
        groups.entry(key(f, text)).or_default().0.push(i);
    }
    for (f, text) in base {
        if let Some(group) = groups.get_mut(&key(f, text.as_ref())) {
            group.1.push(f.line);
        }
    }
    for f in findings.iter_mut() {
        f.baseline = Some(Baseline::New);
    }
    for (candidates, base_lines) in groups.values() {
        // Every pair by distance, nearest first; each side used once.
        let mut pairs: Vec<(u64, usize, usize)> = Vec::new();
        for (ci, &i) in candidates.iter().enumerate() {
            for (bi, b) in base_lines.iter().enumerate() {
                let distance = match (findings[i].line, b) {
                    (Some(l), Some(b)) => (i64::from(l) - i64::from(*b)).unsigned_abs(),
                    _ => 0,
                };
                pairs.push((distance, ci, bi));
            }
        }
        pairs.sort();
        let mut used_c = vec![false; candidates.len()];
        let mut used_b = vec![false; base_lines.len()];
        for (_, ci, bi) in pairs {
            if used_c[ci] || used_b[bi] {
                continue;
            }
            used_c[ci] = true;
            used_b[bi] = true;
            findings[candidates[ci]].baseline = Some(Baseline::Existing);
        }
    }
}

/// The text of line `line` (1-based) of `file` in `tree`, trimmed: what a finding points at.
/// Files are read once each (`cache`), at most 4 MiB of them.
pub(crate) fn line_text(
    tree: &crate::tree::Dir,
    file: &str,
    line: u32,
    cache: &mut BTreeMap<String, Option<Vec<String>>>,
) -> Option<String> {
    let lines = cache.entry(file.to_owned()).or_insert_with(|| {
        let path = Path::new(file);
        if path.is_absolute()
            || path
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            return None;
        }
        tree.join(path)
            .read_limited(4 << 20)
            .ok()
            .map(|text| text.lines().map(|l| l.trim().to_owned()).collect())
    });
    lines
        .as_ref()?
        .get(usize::try_from(line).ok()?.checked_sub(1)?)
        .cloned()
}

/// The texts of the lines `findings` point at, in `tree`.
pub(crate) fn line_texts(tree: &crate::tree::Dir, findings: &[Finding]) -> Vec<Option<String>> {
    let mut cache = BTreeMap::new();
    findings
        .iter()
        .map(|f| match (&f.file, f.line) {
            (Some(file), Some(line)) => line_text(tree, file, line, &mut cache),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use cordon_types::{FindingKind, Severity};

    use super::*;

    fn lint(file: &str, line: u32, code: &str, message: &str) -> Finding {
        Finding {
            kind: FindingKind::Lint,
            severity: Severity::Warning,
            tool: "clippy".into(),
            test: None,
            file: Some(file.into()),
            line: Some(line),
            column: Some(5),
            code: Some(code.into()),
            message: message.into(),
            baseline: None,
            via: None,
        }
    }

    fn marks(findings: &[Finding]) -> Vec<(u32, &str)> {
        findings
            .iter()
            .map(|f| (f.line.unwrap(), f.baseline.unwrap().as_str()))
            .collect()
    }

    /// `findings` with the texts of their lines.
    fn with_texts(findings: &[Finding], texts: &[&str]) -> Vec<(Finding, Option<String>)> {
        findings
            .iter()
            .cloned()
            .zip(texts.iter().map(|t| Some((*t).to_owned())))
            .collect()
    }

    #[test]
    fn findings_the_base_has_are_existing_after_line_shifts() {
        let ret = "return x;";
        let base = with_texts(
            &[
                lint(
                    "src/lib.rs",
                    10,
                    "clippy::needless_return",
                    "unneeded `return` statement",
                ),
                lint(
                    "src/lib.rs",
                    20,
                    "clippy::needless_return",
                    "unneeded `return` statement",
                ),
                lint(
                    "src/other.rs",
                    3,
                    "unused_variables",
                    "unused variable: `x`",
                ),
            ],
            &[ret, ret, "let x = 1;"],
        );
        // Two lines inserted at the top of lib.rs, one of them an unused variable; another
        // needless return between the two the base has.
        let mut now = vec![
            lint("src/lib.rs", 2, "unused_variables", "unused variable: `y`"),
            lint(
                "src/lib.rs",
                12,
                "clippy::needless_return",
                "unneeded `return` statement",
            ),
            lint(
                "src/lib.rs",
                16,
                "clippy::needless_return",
                "unneeded `return` statement",
            ),
            lint(
                "src/lib.rs",
                22,
                "clippy::needless_return",
                "unneeded `return` statement",
            ),
            lint(
                "src/other.rs",
                3,
                "unused_variables",
                "unused variable: `x`",
            ),
        ];
        let texts: Vec<Option<String>> = ["let y = 2;", ret, ret, ret, "let x = 1;"]
            .iter()
            .map(|t| Some((*t).to_owned()))
            .collect();
        classify(&mut now, &texts, &base);
        assert_eq!(
            marks(&now),
            [
                (2, "new"),
                (12, "existing"),
                (16, "new"),
                (22, "existing"),
                (3, "existing")
            ]
        );
        // Another file, another message, or another line of code at the same place: new.
        let mut moved = vec![
            lint("src/new.rs", 3, "unused_variables", "unused variable: `x`"),
            lint(
                "src/other.rs",
                3,
                "unused_variables",
                "unused variable: `z`",
            ),
            lint(
                "src/other.rs",
                3,
                "unused_variables",
                "unused variable: `x`",
            ),
        ];
        let texts = vec![
            Some("let x = 1;".to_owned()),
            Some("let z = 1;".to_owned()),
            Some("let x = 2;".to_owned()),
        ];
        classify(&mut moved, &texts, &base);
        assert_eq!(marks(&moved), [(3, "new"), (3, "new"), (3, "new")]);
    }

    #[test]
    fn records_are_kept_per_commit_and_stage_and_incomplete_ones_are_not_used() {
        let home = tempfile::tempdir().unwrap();
        let store = BaselineStore::new(home.path(), Path::new("/repo/.git"), "rustc 1.95");
        let stage = crate::detect::stage(
            "clippy",
            cordon_types::StageCategory::Lint,
            &["cargo", "clippy"],
            false,
        );
        let found = [lint("src/lib.rs", 1, "c", "m")];
        assert!(store.load("c1", &stage).is_none());
        store
            .record("c1", &stage, true, &found, &[None], true)
            .unwrap();
        let record = store.load("c1", &stage).expect("recorded");
        assert_eq!((record.fails, record.findings.len()), (true, 1));
        assert!(store.load("c2", &stage).is_none(), "another commit");
        let other = BaselineStore::new(home.path(), Path::new("/repo/.git"), "rustc 1.96");
        assert!(other.load("c1", &stage).is_none(), "another toolchain");
        store
            .record("c1", &stage, true, &found, &[None], false)
            .unwrap();
        assert!(store.load("c1", &stage).is_none(), "incomplete");
    }
}
