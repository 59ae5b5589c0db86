//! Warm verification: which trusted build cache the stages see, and when a verification
//! becomes one.
//!
//! A cache is made only by a **trusted build**: a verification, without a patch, of the base
//! commit itself (the merge-base with the default branch, or the `--base` the operator
//! named). Its stages write the build's directories (`target/`, `node_modules/`, `.mypy_cache/`)
//! and the host caches (`~/.cargo/registry`, `~/.npm`, ...) into private upper layers; when
//! the gate passes, those layers are *promoted*: moved into `$CORDON_HOME/caches`, never to be
//! mounted writable again. A candidate (a patch on that commit) sees them as read-only lower
//! layers under upper layers of its own, deleted with its workspace: whatever its `build.rs`
//! or install scripts write, the next verification never sees it.
//!
//! Keyed by the repository, the commit, the toolchains' versions and the stages; the
//! dependency manifests' digests are kept to decide whether an install can be skipped.
//! Re-verifying a commit whose trusted build was kept uses that cache instead of building
//! again. `node_modules/` depends on the Node manifests alone (`package.json` and the
//! lockfile, `package.json` alone without one): any verification, of any commit, uses the
//! newest trusted cache installed from the manifests it has, and skips the install.
//!
//! Declared stages add their `outputs` (a Python `.venv`, say) to the build directories; a
//! candidate skips such a setup stage when no changed file matches its `inputs`
//! (`CachePlan::skips_declared`).
//!
//! Soundness rests on modification times, which build tools trust: a candidate uses the
//! build directories' cache only when its tree is the cache's commit plus the candidate's own
//! changes, written after the cache was made (a ref other than the base gets the host caches
//! only), and a trusted build builds over an earlier cache only when its base tree was checked
//! out after that cache was made (its files all look newer).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cordon_git::CommitId;
use cordon_workspace::{
    BaseRecord, BuildCaches, CacheEntry, CacheEntryTag, CacheInUse, CachePlace, OverlayParts,
    PromotedPlace, Workspaces,
};
use sha2::{Digest, Sha256};

use crate::config::StageConfig;
use crate::tree::Dir;

/// How a verification uses the trusted build caches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CacheMode {
    /// No caches: every build starts cold (the host caches still show through private
    /// layers, as always).
    Off,
    /// Use a trusted cache when there is one; never make one (the library's default: whoever
    /// submits the verification does not decide what is trusted).
    #[default]
    Use,
    /// Also make one when this verification is a trusted build (`cordon verify`'s default).
    Warm,
}

/// Build caches an overlay of the workspace is never worth more than this many layers deep.
const MAX_DEPTH: usize = 8;

/// The caches one verification mounts, and why.
#[derive(Debug, Default)]
pub struct CachePlan {
    /// One line per decision.
    pub reasons: Vec<String>,
    /// What each place shows.
    pub places: Vec<PlannedPlace>,
    /// Whether this verification's layers become a cache when its gate passes.
    pub trusted_build: bool,
    /// The cache the stages see (its key and commit).
    pub used: Option<(String, String)>,
    /// The entry to promote (trusted builds).
    template: Option<CacheEntry>,
    /// The entries in use (their shared locks keep gc away).
    held: Vec<CacheInUse>,
    caches: Option<BuildCaches>,
    /// The lockfile of the project's Cargo workspace (repository-relative), and whether the
    /// commit has it.
    cargo_lock: Option<(PathBuf, bool)>,
    /// The overlay workspace's upper layer: where a trusted build's tools wrote a lockfile the
    /// commit lacks, and where a candidate gets it.
    workspace_upper: Option<PathBuf>,
    /// The toolchains' versions, when they were asked (caching on, an overlay workspace).
    pub(crate) toolchain: Option<String>,
    /// The trusted cache whose `node_modules/` layers the stages see, with the Node manifests
    /// it was installed from.
    node_source: Option<(CacheEntry, BTreeMap<String, String>)>,
}

/// One place under a cache.
#[derive(Debug, Clone)]
pub struct PlannedPlace {
    /// Where: a directory of the workspace or a host cache.
    pub place: CachePlace,
    /// The read-only layers under the verification's own, topmost first (the trusted
    /// layers, then the host's own cache or an empty directory).
    pub lowers: Vec<PathBuf>,
    /// The verification's private directory for this place (`upper/`, `work/`).
    pub layer: PathBuf,
    /// The trusted layers it shows (ids).
    pub trusted: Vec<String>,
    /// What it shows, for `--explain` and the report.
    pub note: String,
}

/// Everything the cache decision needs.
pub(crate) struct CacheInput<'a> {
    pub(crate) mode: CacheMode,
    pub(crate) workspaces: &'a Workspaces,
    pub(crate) common_dir: &'a Path,
    pub(crate) commit: &'a CommitId,
    pub(crate) base: Option<&'a CommitId>,
    pub(crate) patched: bool,
    pub(crate) overlay: Option<&'a OverlayParts>,
    /// The workspace's files (after the patch), and the project in them.
    pub(crate) tree: &'a Dir,
    pub(crate) project: &'a Path,
    /// The stages before targeting.
    pub(crate) stages: &'a [StageConfig],
    /// cordon's private directory of the workspace.
    pub(crate) scratch: &'a Path,
    pub(crate) run_id: Option<&'a str>,
    /// The toolchains' versions, being asked.
    pub(crate) toolchain: ToolchainProbe,
}

/// The host caches a stage may see (those that exist), as before warm builds: dependency
/// downloads of cargo, npm, pnpm, yarn, Go, pip and bun.
pub(crate) fn host_cache_dirs() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".cargo")));
    let mut dirs = Vec::new();
    if let Some(c) = &cargo_home {
        dirs.push(c.join("registry"));
        dirs.push(c.join("git"));
    }
    if let Some(h) = &home {
        for rel in [
            ".npm",
            ".cache/pnpm",
            ".local/share/pnpm",
            ".cache/yarn",
            "go/pkg/mod",
            ".cache/pip",
            ".bun/install/cache",
        ] {
            dirs.push(h.join(rel));
        }
    }
    dirs.into_iter()
        .filter(|d| d.is_dir())
        .filter_map(|d| d.canonicalize().ok())
        .collect()
}

/// Whether a stage runs one of `programs` (directly, or as `python3 -m NAME`).
fn runs(stages: &[StageConfig], programs: &[&str]) -> bool {
    stages.iter().any(|s| {
        let first = s.run.first().map(|r| r.rsplit('/').next().unwrap_or(r));
        let module = s
            .run
            .iter()
            .position(|a| a == "-m")
            .and_then(|i| s.run.get(i + 1))
            .map(String::as_str);
        first.is_some_and(|p| programs.contains(&p))
            || module.is_some_and(|m| programs.contains(&m))
    })
}

/// The build directories of the project the stages write, relative to the workspace's top:
/// Cargo's `target/` (of the Cargo workspace the project belongs to), `node_modules/`,
/// mypy's and ruff's caches.
fn build_dirs(tree: &Dir, project: &Path, stages: &[StageConfig]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let at = tree.join(project);
    if at.join("Cargo.toml").is_file() && runs(stages, &["cargo"]) {
        // The Cargo workspace the project belongs to owns `target/` (the same directory the
        // detected clippy stage builds under).
        let owner = at.join(crate::detect::cargo_owner(&at));
        out.push(owner.rel().join("target"));
    }
    if at.join("package.json").is_file() && runs(stages, &["npm", "npx", "pnpm", "yarn", "bun"]) {
        out.push(project.join("node_modules"));
    }
    if runs(stages, &["mypy", "dmypy"]) {
        out.push(project.join(".mypy_cache"));
    }
    if runs(stages, &["ruff"]) {
        out.push(project.join(".ruff_cache"));
    }
    // What declared stages say they make (`outputs`, e.g. a Python `.venv`).
    for dir in stages.iter().flat_map(|s| &s.outputs) {
        let dir = project.join(dir);
        if !out.contains(&dir) {
            out.push(dir);
        }
    }
    out
}

/// The dependency manifests whose digests decide whether an install can be skipped.
const MANIFESTS: &[&str] = &[
    "Cargo.lock",
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lock",
    "bun.lockb",
    "poetry.lock",
    "uv.lock",
    "requirements.txt",
];

fn manifest_digests(tree: &Dir, project: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for name in MANIFESTS {
        let rel = project.join(name);
        if let Ok(text) = tree.join(&rel).read_to_string() {
            out.insert(
                rel.display().to_string(),
                hex(&Sha256::digest(text.as_bytes())),
            );
        }
    }
    out
}

/// The Node manifests among `digests` (`package.json` and the lockfiles): what an install's
/// `node_modules/` is made from. Empty when the project has none.
fn node_manifests(digests: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    const NODE: &[&str] = &[
        "package.json",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lock",
        "bun.lockb",
    ];
    digests
        .iter()
        .filter(|(k, _)| NODE.contains(&k.rsplit('/').next().unwrap_or(k)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The versions of the toolchains the stages use, asked from a neutral directory (a
/// repository's `rust-toolchain.toml` could name a program to run). Asked on a thread of its
/// own while the workspace is patched: through rustup, `rustc -vV` alone takes 15-20 ms.
pub(crate) struct ToolchainProbe(std::cell::Cell<Option<std::thread::JoinHandle<String>>>);

impl ToolchainProbe {
    /// A probe never asked (no build cache will need it).
    pub(crate) fn unused() -> ToolchainProbe {
        ToolchainProbe(std::cell::Cell::new(None))
    }

    /// Starts asking for the versions of the toolchains `stages` use (`python`'s answer, when
    /// it asks, stands for `python3 --version`).
    pub(crate) fn start(
        stages: &[StageConfig],
        python: &crate::detect::PythonProbe,
    ) -> ToolchainProbe {
        let uses = |p: &[&str]| {
            stages.iter().any(|s| {
                s.run
                    .first()
                    .is_some_and(|r| p.contains(&r.rsplit('/').next().unwrap_or(r)))
            })
        };
        let mut probes: Vec<&'static [&'static str]> = Vec::new();
        if uses(&["cargo", "rustc"]) {
            probes.push(&["rustc", "-vV"]);
        }
        if uses(&["npm", "npx", "pnpm", "yarn", "node", "bun"]) {
            probes.push(&["node", "--version"]);
        }
        if uses(&["python", "python3", "pytest", "mypy", "ruff"]) {
            probes.push(&["python3", "--version"]);
        }
        if uses(&["go"]) {
            probes.push(&["go", "version"]);
        }
        let python = python.clone();
        ToolchainProbe(std::cell::Cell::new(Some(std::thread::spawn(move || {
            versions(&probes, &python)
        }))))
    }

    /// The versions, one line per toolchain (`missing` for one that did not answer).
    fn wait(&self) -> String {
        self.0
            .take()
            .and_then(|probe| probe.join().ok())
            .unwrap_or_else(|| "probe failed\n".into())
    }
}

fn versions(probes: &[&[&str]], python: &crate::detect::PythonProbe) -> String {
    let mut out = String::new();
    for argv in probes {
        if argv[0] == "python3"
            && let Some(facts) = python.facts()
        {
            out.push_str(&format!("python3: {}\n", facts.version));
            continue;
        }
        let version = std::process::Command::new(argv[0])
            .args(&argv[1..])
            .current_dir("/")
            .stdin(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|| "missing".into());
        out.push_str(&format!("{}: {version}\n", argv[0]));
    }
    out
}

/// A digest of the stages (before targeting narrows them).
fn plan_digest(stages: &[StageConfig]) -> String {
    let mut h = Sha256::new();
    for s in stages {
        h.update(s.name.as_bytes());
        h.update([0]);
        h.update(s.category.as_str().as_bytes());
        for a in &s.run {
            h.update([1]);
            h.update(a.as_bytes());
        }
        for (k, v) in &s.env {
            h.update([2]);
            h.update(k.as_bytes());
            h.update([3]);
            h.update(v.as_bytes());
        }
        if let Some(cwd) = &s.cwd {
            h.update([4]);
            h.update(cwd.as_os_str().as_encoded_bytes());
        }
        for out in &s.outputs {
            h.update([6]);
            h.update(out.as_os_str().as_encoded_bytes());
        }
        for glob in &s.inputs {
            h.update([7]);
            h.update(glob.as_bytes());
        }
        h.update([5]);
    }
    hex(&h.finalize())
}

fn key(common_dir: &Path, commit: &CommitId, toolchain: &str, plan: &str) -> String {
    let mut h = Sha256::new();
    for part in [
        common_dir.as_os_str().as_encoded_bytes(),
        commit.as_str().as_bytes(),
        toolchain.as_bytes(),
        plan.as_bytes(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    hex(&h.finalize())
}

/// The cache a trusted build builds over: the newest cache of an earlier commit (same
/// repository, toolchains and stages, not too deep) whose build ended before this commit's
/// base tree was checked out, so every file here looks newer than what it built.
fn earlier_cache(input: &CacheInput<'_>, basis: &Basis) -> Option<CacheInUse> {
    let created = basis.base_created_ms();
    basis
        .caches
        .list()
        .into_iter()
        .filter(|e| {
            e.repo == input.common_dir
                && e.toolchain == basis.toolchain
                && e.plan == basis.plan_fp
                && e.key != basis.own_key
                && e.built_ms < created
                && e.places.iter().all(|p| p.layers.len() < MAX_DEPTH)
        })
        .find_map(|e| basis.caches.open(&e.key).ok().flatten())
}

/// What a verification with caching on decides its caches from.
struct Basis {
    /// The trusted caches.
    caches: BuildCaches,
    /// The toolchains' versions.
    toolchain: String,
    /// The digest of the stages.
    plan_fp: String,
    /// The description of the commit's base tree, when it exists.
    base_record: Option<BaseRecord>,
    /// The key of a cache of the commit itself.
    own_key: String,
    /// The build directories (repository-relative) a cache holds.
    dirs: Vec<PathBuf>,
}

impl Basis {
    fn gather(input: &CacheInput<'_>) -> Basis {
        let caches = input.workspaces.caches();
        let toolchain = input.toolchain.wait();
        let plan_fp = plan_digest(input.stages);
        let base_record = input
            .workspaces
            .existing_base(input.commit)
            .map(|b| b.record);
        let own_key = key(input.common_dir, input.commit, &toolchain, &plan_fp);
        let dirs: Vec<PathBuf> = build_dirs(input.tree, input.project, input.stages)
            .into_iter()
            // A build directory committed to the repository is the project's, not a cache.
            .filter(|d| !input.tree.join(d).is_dir())
            .collect();
        Basis {
            caches,
            toolchain,
            plan_fp,
            base_record,
            own_key,
            dirs,
        }
    }

    /// When the commit's base tree was checked out (0 when unknown).
    fn base_created_ms(&self) -> u64 {
        self.base_record.as_ref().map_or(0, |b| b.created_ms)
    }
}

impl CachePlan {
    /// Decides what the stages see (see the module documentation).
    pub(crate) fn decide(input: &CacheInput<'_>) -> CachePlan {
        let mut plan = CachePlan::default();
        let host = host_cache_dirs();
        if input.overlay.is_none() {
            plan.reasons.push(
                "no build cache: the workspace is a git worktree (build caches need overlay workspaces; `cordon doctor` says why they are unavailable)"
                    .into(),
            );
            plan.plain_host(input, &host);
            return plan;
        }
        if input.mode == CacheMode::Off {
            plan.reasons.push("no build cache: caching is off".into());
            plan.plain_host(input, &host);
            return plan;
        }
        let basis = Basis::gather(input);
        plan.toolchain = Some(basis.toolchain.clone());
        plan.workspace_upper = input.overlay.map(|o| o.layer.join("upper"));
        plan.cargo_lock = basis
            .dirs
            .iter()
            .filter(|d| d.file_name() == Some("target".as_ref()))
            .map(|d| d.with_file_name("Cargo.lock"))
            .find(|lock| input.tree.join(lock.with_file_name("Cargo.toml")).is_file())
            .map(|lock| {
                let committed = input.tree.join(&lock).is_file();
                (lock, committed)
            });
        let trusted_build =
            input.mode == CacheMode::Warm && !input.patched && input.base == Some(input.commit);
        // Re-verifying a commit whose trusted build was kept: its cache serves, as a
        // candidate's would (private layers, nothing promoted), instead of a cold rebuild.
        let kept = trusted_build && basis.caches.open(&basis.own_key).ok().flatten().is_some();
        if trusted_build && !kept {
            plan.trusted_build(input, &host, basis);
        } else {
            if kept {
                plan.reasons.push(format!(
                    "the trusted build of {} was kept: re-verifying it uses that cache (writes go to private layers, deleted afterwards)",
                    short(input.commit)
                ));
            }
            plan.candidate(input, &host, basis);
        }
        plan
    }

    /// The newest trusted cache of this repository, toolchains and stages whose
    /// `node_modules/` (at `dir`) was installed from the Node manifests the tree has now: an
    /// install's output depends on those alone, so any commit's serves. Held while used.
    fn node_modules(
        input: &CacheInput<'_>,
        basis: &Basis,
        dir: &Path,
    ) -> Option<(CacheInUse, BTreeMap<String, String>)> {
        let now = node_manifests(&manifest_digests(input.tree, input.project));
        if now.is_empty() {
            return None;
        }
        let place = CachePlace::Tree(dir.to_owned());
        basis
            .caches
            .list()
            .into_iter()
            .filter(|e| {
                e.repo == input.common_dir
                    && e.toolchain == basis.toolchain
                    && e.plan == basis.plan_fp
                    && node_manifests(&e.lockfiles) == now
                    && e.layers_of(&place).is_some_and(|l| !l.is_empty())
            })
            .find_map(|e| basis.caches.open(&e.key).ok().flatten())
            .map(|held| (held, now))
    }

    /// Host cache `i` (`dir`) under a private layer, over the `trusted` layers (`ids`).
    fn host_place(
        &mut self,
        input: &CacheInput<'_>,
        i: usize,
        dir: &Path,
        trusted: Vec<PathBuf>,
        ids: Vec<String>,
    ) {
        let mut lowers = trusted;
        lowers.push(dir.to_owned());
        let note = if ids.is_empty() {
            "the host's cache under a private layer".to_owned()
        } else {
            format!(
                "the host's cache and {} trusted layer(s) under a private layer",
                ids.len()
            )
        };
        self.places.push(PlannedPlace {
            place: CachePlace::Host(dir.to_owned()),
            lowers,
            layer: input.scratch.join(format!("cache-{i}")),
            trusted: ids,
            note,
        });
    }

    /// Every host cache under a private layer, without trusted layers.
    fn plain_host(&mut self, input: &CacheInput<'_>, host: &[PathBuf]) {
        for (i, dir) in host.iter().enumerate() {
            self.host_place(input, i, dir, Vec::new(), Vec::new());
        }
    }

    /// A trusted build (the base commit itself, without a patch): its stages write private
    /// layers over the newest earlier cache it may build over, promoted when the gate passes.
    fn trusted_build(&mut self, input: &CacheInput<'_>, host: &[PathBuf], basis: Basis) {
        self.trusted_build = true;
        self.reasons.push(format!(
            "trusted build: the base commit {} itself, without a patch; when the gate passes, what its stages wrote into {} becomes the cache of this commit",
            short(input.commit),
            if basis.dirs.is_empty() {
                "the host caches".to_owned()
            } else {
                basis.dirs.iter()
                    .map(|d| format!("{}/", d.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
        let parent = earlier_cache(input, &basis);
        match &parent {
            Some(p) => self.reasons.push(format!(
                "built over the trusted cache of {} (its base tree was checked out after that cache was made, so the project's own files all look newer than it)",
                short(&p.entry.commit)
            )),
            None => self.reasons.push("built cold: no earlier trusted cache made before this commit's base tree".into()),
        }
        let caches = &basis.caches;
        let empty = caches.empty().ok();
        let parent_entry = parent.as_ref().map(|p| p.entry.clone());
        let parent_layers = |place: CachePlace| -> Vec<String> {
            parent_entry
                .as_ref()
                .and_then(|e| e.layers_of(&place))
                .map(<[String]>::to_vec)
                .unwrap_or_default()
        };
        let node_dir = input.project.join("node_modules");
        for (i, dir) in basis.dirs.iter().enumerate() {
            // `node_modules/` installed from the same manifests, by whichever trusted build:
            // the install is then skipped and the layers carry over into this cache.
            if *dir == node_dir
                && let Some((held, manifests)) = CachePlan::node_modules(input, &basis, dir)
            {
                let ids = held
                    .entry
                    .layers_of(&CachePlace::Tree(dir.clone()))
                    .unwrap_or_default()
                    .to_vec();
                self.places.push(PlannedPlace {
                    place: CachePlace::Tree(dir.clone()),
                    lowers: ids.iter().map(|id| caches.layer(id)).collect(),
                    layer: input.scratch.join(format!("tree-{i}")),
                    note: format!(
                        "{} layer(s) of the trusted cache of {} (same Node manifests), a private layer to promote",
                        ids.len(),
                        short(&held.entry.commit)
                    ),
                    trusted: ids,
                });
                self.node_source = Some((held.entry.clone(), manifests));
                self.held.push(held);
                continue;
            }
            let ids = parent_layers(CachePlace::Tree(dir.clone()));
            let mut lowers: Vec<PathBuf> = ids.iter().map(|id| caches.layer(id)).collect();
            if lowers.is_empty() {
                lowers.extend(empty.clone());
            }
            self.places.push(PlannedPlace {
                place: CachePlace::Tree(dir.clone()),
                lowers,
                layer: input.scratch.join(format!("tree-{i}")),
                note: if ids.is_empty() {
                    "empty: a private layer to promote".into()
                } else {
                    format!(
                        "{} layer(s) of the earlier cache, a private layer to promote",
                        ids.len()
                    )
                },
                trusted: ids,
            });
        }
        for (i, dir) in host.iter().enumerate() {
            let ids = parent_layers(CachePlace::Host(dir.clone()));
            let trusted = ids.iter().map(|id| caches.layer(id)).collect();
            self.host_place(input, i, dir, trusted, ids);
        }
        let base_created_ms = basis.base_created_ms();
        self.template = Some(CacheEntry {
            schema: CacheEntryTag,
            key: basis.own_key,
            repo: input.common_dir.to_owned(),
            commit: input.commit.clone(),
            base_created_ms,
            toolchain: basis.toolchain,
            plan: basis.plan_fp,
            lockfiles: manifest_digests(input.tree, input.project),
            built_ms: 0,
            run_id: input.run_id.map(str::to_owned),
            places: Vec::new(),
            made_lockfiles: BTreeMap::new(),
        });
        self.held.extend(parent);
        self.caches = Some(basis.caches);
    }

    /// A candidate: the trusted cache of its base commit, if there is one; its build
    /// directories only when the candidate's tree is that commit's (plus its own changes).
    fn candidate(&mut self, input: &CacheInput<'_>, host: &[PathBuf], basis: Basis) {
        let base_commit = input.base.cloned();
        let cache_commit = base_commit.clone().unwrap_or_else(|| input.commit.clone());
        let cache_key = key(
            input.common_dir,
            &cache_commit,
            &basis.toolchain,
            &basis.plan_fp,
        );
        let caches = &basis.caches;
        let found = caches.open(&cache_key).ok().flatten();
        let Some(found) = found else {
            self.reasons.push(format!(
                "no trusted build cache of {} yet: builds start cold{}",
                short(&cache_commit),
                if input.mode == CacheMode::Warm {
                    format!(
                        " (`cordon verify --ref {}` without a patch makes one)",
                        short(&cache_commit)
                    )
                } else {
                    String::new()
                }
            ));
            self.plain_host(input, host);
            self.node_modules_by_manifest(input, &basis, &input.project.join("node_modules"));
            return;
        };
        let entry = found.entry.clone();
        self.used = Some((entry.key.clone(), entry.commit.to_string()));
        let tree_ok = base_commit.as_ref() == Some(input.commit);
        if tree_ok {
            let instance = match &basis.base_record {
                Some(b) if b.created_ms == entry.base_created_ms => {
                    "the same base tree it was built in: only what changed rebuilds"
                }
                _ => {
                    "a base tree checked out again since: the project's own files look new, they rebuild"
                }
            };
            self.reasons.push(format!(
                "trusted build cache of {} (run {}): {instance}; the candidate's writes go to private layers, deleted afterwards",
                short(&entry.commit),
                entry.run_id.as_deref().unwrap_or("?"),
            ));
        } else {
            self.reasons.push(format!(
                "the ref is not its base ({}): its build directories are not used, only its host caches' trusted layers (files that differ from the base would look older than its build directories)",
                short(&cache_commit)
            ));
        }
        let node_dir = input.project.join("node_modules");
        if tree_ok {
            for (i, dir) in basis.dirs.iter().enumerate() {
                let Some(ids) = entry.layers_of(&CachePlace::Tree(dir.clone())) else {
                    continue;
                };
                if *dir == node_dir {
                    self.node_source = Some((entry.clone(), node_manifests(&entry.lockfiles)));
                }
                self.places.push(PlannedPlace {
                    place: CachePlace::Tree(dir.clone()),
                    lowers: ids.iter().map(|id| caches.layer(id)).collect(),
                    layer: input.scratch.join(format!("tree-{i}")),
                    trusted: ids.to_vec(),
                    note: format!(
                        "trusted cache {} ({} layer(s)) under a private layer",
                        &entry.key[..12],
                        ids.len()
                    ),
                });
            }
        }
        for (i, dir) in host.iter().enumerate() {
            let ids: Vec<String> = entry
                .layers_of(&CachePlace::Host(dir.clone()))
                .map(<[String]>::to_vec)
                .unwrap_or_default();
            let trusted = ids.iter().map(|id| caches.layer(id)).collect();
            self.host_place(input, i, dir, trusted, ids);
        }
        self.template = Some(entry);
        self.held.push(found);
        if !tree_ok {
            self.node_modules_by_manifest(input, &basis, &node_dir);
        }
    }

    /// Mounts the `node_modules/` (at `dir`) of a trusted cache installed from the tree's own
    /// Node manifests (see [`CachePlan::node_modules`]), when the plan has that place and
    /// does not mount one yet.
    fn node_modules_by_manifest(&mut self, input: &CacheInput<'_>, basis: &Basis, dir: &Path) {
        let Some(i) = basis.dirs.iter().position(|d| d == dir) else {
            return;
        };
        if self
            .places
            .iter()
            .any(|p| p.place == CachePlace::Tree(dir.to_owned()))
        {
            return;
        }
        let Some((held, manifests)) = CachePlan::node_modules(input, basis, dir) else {
            return;
        };
        let place = CachePlace::Tree(dir.to_owned());
        let ids = held.entry.layers_of(&place).unwrap_or_default().to_vec();
        self.reasons.push(format!(
            "{}/ comes from the trusted cache of {} (run {}), installed from the same package.json and lockfile",
            dir.display(),
            short(&held.entry.commit),
            held.entry.run_id.as_deref().unwrap_or("?"),
        ));
        self.places.push(PlannedPlace {
            place,
            lowers: ids.iter().map(|id| basis.caches.layer(id)).collect(),
            layer: input.scratch.join(format!("tree-{i}")),
            note: format!(
                "trusted cache {} ({} layer(s), same Node manifests) under a private layer",
                &held.entry.key[..12],
                ids.len()
            ),
            trusted: ids,
        });
        self.node_source = Some((held.entry.clone(), manifests));
        self.held.push(held);
    }

    /// The install stage a verification may skip: its `node_modules/` comes from a trusted
    /// cache made from the same `package.json` and lockfile (the tree's own commit's, its
    /// base's, or any of the repository's caches with the same manifests: see
    /// [`CachePlan::node_modules`]). Returns the reason, or `None` when it must run.
    pub(crate) fn skips_install(&self, tree: &Dir, project: &Path) -> Option<String> {
        let (entry, manifests) = self.node_source.as_ref()?;
        let modules = project.join("node_modules");
        self.places
            .iter()
            .find(|p| p.place == CachePlace::Tree(modules.clone()) && !p.trusted.is_empty())?;
        let now = node_manifests(&manifest_digests(tree, project));
        (!now.is_empty() && now == *manifests).then(|| {
            format!(
                "node_modules/ comes from the trusted cache of {}: package.json and the lockfile are the same{}",
                short(&entry.commit),
                if now.len() == 1 {
                    " (no lockfile: keyed by package.json)"
                } else {
                    ""
                }
            )
        })
    }

    /// Whether a candidate may skip `cargo fetch`: its tree is the trusted cache's commit plus
    /// changes that touch no Cargo manifest, lockfile, `.cargo/` configuration or toolchain
    /// file, so its dependencies are exactly those the trusted build fetched (its layers hold
    /// them; the offline build would fail, not guess, were one missing). Returns the reason.
    pub(crate) fn skips_fetch(&self, changed: &[String]) -> Option<String> {
        let entry = self.template.as_ref().filter(|_| !self.trusted_build)?;
        // Only when the build directories come from the cache too (the tree is its commit).
        self.places
            .iter()
            .find(|p| matches!(p.place, CachePlace::Tree(_)) && !p.trusted.is_empty())?;
        let touches_dependencies = changed.iter().any(|path| {
            let name = path.rsplit('/').next().unwrap_or(path);
            matches!(
                name,
                "Cargo.toml" | "Cargo.lock" | "rust-toolchain" | "rust-toolchain.toml"
            ) || path.starts_with(".cargo/")
                || path.contains("/.cargo/")
        });
        (!touches_dependencies).then(|| {
            format!(
                "dependencies unchanged since the trusted build of {} (no Cargo manifest, lockfile or .cargo/ file changed): its registry layer holds them",
                short(&entry.commit)
            )
        })
    }

    /// Gives a candidate the lockfile its trusted build's Cargo wrote, when the commit has
    /// none and the candidate's changes leave every manifest alone (as for skipping `cargo
    /// fetch`): Cargo then builds with the versions the cache was built with instead of
    /// resolving the dependencies again (about 190 ms of a warm verification of semver,
    /// BENCHMARKS.md). Written as a new file into the workspace's upper layer, before any
    /// program runs there. Returns what was done, for the plan's reasons.
    pub(crate) fn seed_lockfile(&self, changed: &[String]) -> Option<String> {
        let (lock, false) = self.cargo_lock.as_ref()? else {
            return None;
        };
        let upper = self.workspace_upper.as_ref()?;
        self.skips_fetch(changed)?;
        let entry = self.template.as_ref()?;
        let name = lock.to_str()?;
        let text = entry.made_lockfiles.get(name)?;
        Some(match crate::lockfile::seed(upper, lock, text) {
            Ok(()) => format!(
                "{name}: the one the trusted build of {} resolved (the commit has none and no manifest changed), so Cargo does not resolve again",
                short(&entry.commit)
            ),
            Err(e) => format!(
                "{name}: the trusted build's could not be used ({e}): Cargo resolves the dependencies"
            ),
        })
    }

    /// Whether a candidate may skip a declared setup stage with `outputs` and `inputs`: every
    /// output comes from the trusted cache (its tree is the cache's commit plus the
    /// candidate's changes), the changed files are known, all inside the project, and none
    /// matches `inputs`. `changed` is repository-relative; `project` the project's directory
    /// in it. Returns the reason, or `None` when the stage must run.
    pub(crate) fn skips_declared(
        &self,
        stage: &StageConfig,
        project: &Path,
        changed: Option<&[String]>,
    ) -> Option<String> {
        let entry = self.template.as_ref().filter(|_| !self.trusted_build)?;
        if stage.inputs.is_empty() || stage.outputs.is_empty() {
            return None;
        }
        let cached = stage.outputs.iter().all(|out| {
            let place = CachePlace::Tree(project.join(out));
            self.places
                .iter()
                .any(|p| p.place == place && !p.trusted.is_empty())
        });
        if !cached {
            return None;
        }
        // Fail closed: unknown changes, or a change outside the project, run the stage.
        let changed = changed?;
        let mut inside = Vec::with_capacity(changed.len());
        for path in changed {
            let rel = Path::new(path).strip_prefix(project).ok()?;
            inside.push(rel.to_string_lossy().into_owned());
        }
        if crate::target::matches_when_changed(&stage.inputs, &inside) {
            return None;
        }
        Some(format!(
            "{} come(s) from the trusted cache of {}: no changed file matches its inputs ({})",
            stage
                .outputs
                .iter()
                .map(|o| format!("{}/", o.display()))
                .collect::<Vec<_>>()
                .join(", "),
            short(&entry.commit),
            stage.inputs.join(", ")
        ))
    }

    /// The caches of a run of a stage on the base commit (see `base_run`), whose private
    /// layers go under `scratch`: the build directories' trusted layers when this plan shows
    /// some (they are then the base's), under a private layer of their own; the host caches
    /// as this plan shows them (read-only in a lint stage, with what this verification's setup
    /// stages added). Never this verification's own build directories.
    pub(crate) fn for_base_run(&self, scratch: &Path) -> CachePlan {
        let places = self
            .places
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match &p.place {
                CachePlace::Tree(_) if p.trusted.is_empty() => None,
                CachePlace::Tree(_) => Some(PlannedPlace {
                    layer: scratch.join(format!("tree-{i}")),
                    ..p.clone()
                }),
                CachePlace::Host(_) => Some(p.clone()),
            })
            .collect();
        CachePlan {
            places,
            ..CachePlan::default()
        }
    }

    /// What a stage sees at each place (for `--explain`).
    pub fn lines(&self) -> Vec<String> {
        self.places
            .iter()
            .filter(|p| matches!(p.place, CachePlace::Tree(_)) || !p.trusted.is_empty())
            .map(|p| format!("{}: {}", p.place, p.note))
            .collect()
    }

    /// Promotes this trusted build's layers (call when its gate passed): `Ok(Some(key))`
    /// when a cache was made.
    pub(crate) fn promote(&self) -> Result<Option<String>, cordon_workspace::WorkspaceError> {
        let (Some(caches), Some(template), true) =
            (&self.caches, &self.template, self.trusted_build)
        else {
            return Ok(None);
        };
        let promoted: Vec<PromotedPlace> = self
            .places
            .iter()
            .map(|p| PromotedPlace {
                place: p.place.clone(),
                upper: p.layer.join("upper"),
                over: p.trusted.clone(),
            })
            .collect();
        let mut entry = template.clone();
        entry.built_ms = BuildCaches::now_ms();
        // A lockfile Cargo wrote because the commit has none (a library's): kept for the
        // candidates. Unreadable or odd (not a regular file): not kept, they resolve.
        if let (Some((lock, false)), Some(upper)) = (&self.cargo_lock, &self.workspace_upper)
            && let Some(name) = lock.to_str()
            && let Ok(Some(text)) = crate::lockfile::read(upper, lock)
        {
            entry.made_lockfiles.insert(name.to_owned(), text);
        }
        Ok(caches.promote(entry, &promoted)?.map(|e| e.key))
    }
}

fn short(commit: &CommitId) -> &str {
    &commit.as_str()[..12]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A candidate's plan whose `.venv` (in project `py/`) comes from a trusted cache.
    fn candidate(trusted: bool) -> CachePlan {
        let commit = CommitId::parse(&"a".repeat(40)).unwrap();
        CachePlan {
            places: vec![PlannedPlace {
                place: CachePlace::Tree(PathBuf::from("py/.venv")),
                lowers: Vec::new(),
                layer: PathBuf::from("/nowhere"),
                trusted: if trusted {
                    vec!["l1".into()]
                } else {
                    Vec::new()
                },
                note: String::new(),
            }],
            template: Some(CacheEntry {
                schema: CacheEntryTag,
                key: "k".into(),
                repo: PathBuf::from("/r"),
                commit,
                base_created_ms: 0,
                toolchain: String::new(),
                plan: String::new(),
                lockfiles: BTreeMap::new(),
                built_ms: 0,
                run_id: None,
                places: Vec::new(),
                made_lockfiles: BTreeMap::new(),
            }),
            ..CachePlan::default()
        }
    }

    fn venv_stage() -> StageConfig {
        let mut s = crate::detect::stage(
            "venv",
            cordon_types::StageCategory::Setup,
            &["sh", "-c", "make-venv"],
            true,
        );
        s.outputs = vec![PathBuf::from(".venv")];
        s.inputs = vec!["requirements*.txt".into(), "wheels/**".into()];
        s
    }

    #[test]
    fn a_declared_setup_stage_is_skipped_only_when_it_is_safe() {
        let plan = candidate(true);
        let stage = venv_stage();
        let project = Path::new("py");
        let skip = |changed: Option<&[&str]>| {
            let owned: Option<Vec<String>> =
                changed.map(|c| c.iter().map(|s| (*s).to_owned()).collect());
            plan.skips_declared(&stage, project, owned.as_deref())
        };
        let why = skip(Some(&["py/app/x.py", "py/tests/test_x.py"])).expect("skipped");
        assert!(
            why.contains(".venv/ come(s) from the trusted cache of aaaaaaaaaaaa"),
            "{why}"
        );
        assert!(skip(Some(&[])).is_some(), "nothing changed");
        // An input changed, anywhere its globs reach.
        assert_eq!(
            skip(Some(&["py/app/x.py", "py/requirements-dev.txt"])),
            None
        );
        assert_eq!(skip(Some(&["py/wheels/dep-1.whl"])), None);
        // Unknown changes, or a change outside the project: it runs (fail closed).
        assert_eq!(skip(None), None);
        assert_eq!(skip(Some(&["py/app/x.py", "other/requirements.txt"])), None);
        // Outputs not from a trusted cache, a trusted build, or no inputs: it runs.
        let cold = candidate(false);
        assert_eq!(
            cold.skips_declared(&stage, project, Some(&["py/app/x.py".to_owned()])),
            None
        );
        let mut trusted_build = candidate(true);
        trusted_build.trusted_build = true;
        assert_eq!(
            trusted_build.skips_declared(&stage, project, Some(&[])),
            None
        );
        let mut no_inputs = venv_stage();
        no_inputs.inputs.clear();
        assert_eq!(plan.skips_declared(&no_inputs, project, Some(&[])), None);
    }
}
