//! [`Layers`]: the merged view of a copy-on-write tree read straight from its layers, with the
//! rules of overlayfs as cordon mounts it (unprivileged, `userxattr`, no redirects, no
//! metacopy): the topmost layer holding a name decides it; a whiteout (a character device
//! 0/0) hides the name below; a directory marked opaque (`user.overlay.opaque`) hides the
//! directories of that name below; otherwise same-named directories merge.
//!
//! The host never mounts an overlay workspace, so this is how cordon reads one on the host
//! (patch safety, a verification's detection). Nothing here follows a symlink unless asked to
//! ([`Layers::resolve`]), and then only within the tree.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// What a name is in the merged tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else (a device, a FIFO, a socket).
    Other,
}

/// One entry of the merged tree: its kind and where its content lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// What it is.
    pub kind: EntryKind,
    /// The real path of the entry in the layer that provides it (for a directory, the
    /// topmost one).
    pub real: PathBuf,
}

/// A copy-on-write tree's layers, topmost first: an optional upper layer (where a program's
/// writes went), then read-only lowers (a workspace's base tree). A plain directory is the
/// tree of one lower layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers {
    layers: Vec<PathBuf>,
}

/// Symlinks followed in one [`Layers::resolve`], like the kernel's limit.
const MAX_LINKS: usize = 40;

impl Layers {
    /// The merged view of `layers`, topmost first.
    pub fn new(layers: Vec<PathBuf>) -> Layers {
        Layers { layers }
    }

    /// A plain directory as a tree.
    pub fn dir(root: impl Into<PathBuf>) -> Layers {
        Layers {
            layers: vec![root.into()],
        }
    }

    /// The layers, topmost first.
    pub fn layers(&self) -> &[PathBuf] {
        &self.layers
    }

    /// The entry at `rel` (a relative path of plain components), without following symlinks;
    /// `Ok(None)` when there is none (or a component on the way is not a directory).
    pub fn lstat(&self, rel: &Path) -> std::io::Result<Option<Entry>> {
        let names = plain_components(rel)?;
        let mut active: Vec<PathBuf> = self.layers.clone();
        let mut found = Entry {
            kind: EntryKind::Dir,
            real: self.layers.first().cloned().unwrap_or_default(),
        };
        for (i, name) in names.iter().enumerate() {
            let Some((entry, below)) = step(&active, name)? else {
                return Ok(None);
            };
            if i + 1 < names.len() && entry.kind != EntryKind::Dir {
                return Ok(None);
            }
            active = below;
            found = entry;
        }
        Ok(Some(found))
    }

    /// The names in the directory at `rel` with their kinds, sorted; `Ok(None)` when `rel` is
    /// not a directory of the merged tree.
    pub fn read_dir(&self, rel: &Path) -> std::io::Result<Option<Vec<(OsString, EntryKind)>>> {
        let names = plain_components(rel)?;
        let mut active: Vec<PathBuf> = self.layers.clone();
        for name in &names {
            match step(&active, name)? {
                Some((entry, below)) if entry.kind == EntryKind::Dir => active = below,
                _ => return Ok(None),
            }
        }
        let mut out: std::collections::BTreeMap<OsString, EntryKind> = Default::default();
        let mut hidden: std::collections::BTreeSet<OsString> = Default::default();
        for dir in &active {
            let entries = match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for entry in entries {
                let entry = entry?;
                let name = entry.file_name();
                if out.contains_key(&name) || hidden.contains(&name) {
                    continue;
                }
                let meta = std::fs::symlink_metadata(entry.path())?;
                if is_whiteout(&meta) {
                    hidden.insert(name);
                } else {
                    out.insert(name, kind_of(&meta));
                }
            }
        }
        Ok(Some(out.into_iter().collect()))
    }

    /// `rel` with every symlink resolved inside the tree: `Some` relative path of what it
    /// names (which may not exist), `None` when a symlink leads out of the tree. `inside` is
    /// where the tree appears to the programs that wrote it (an absolute symlink target under
    /// it stays inside).
    pub fn resolve(&self, rel: &Path, inside: Option<&Path>) -> std::io::Result<Option<PathBuf>> {
        let mut pending: Vec<OsString> = plain_components(rel)?
            .into_iter()
            .rev()
            .map(OsStr::to_owned)
            .collect();
        let mut done = PathBuf::new();
        let mut links = 0;
        while let Some(name) = pending.pop() {
            let candidate = done.join(&name);
            match self.lstat(&candidate)? {
                Some(Entry {
                    kind: EntryKind::Symlink,
                    real,
                }) => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Ok(None);
                    }
                    let target = std::fs::read_link(&real)?;
                    let base = if target.is_absolute() {
                        match inside.and_then(|inside| target.strip_prefix(inside).ok()) {
                            Some(rest) => {
                                done = PathBuf::new();
                                rest.to_owned()
                            }
                            None => return Ok(None),
                        }
                    } else {
                        target
                    };
                    let mut expanded = Vec::new();
                    for component in base.components() {
                        match component {
                            Component::Normal(n) => expanded.push(n.to_owned()),
                            Component::ParentDir => expanded.push(OsString::from("..")),
                            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                        }
                    }
                    pending.extend(expanded.into_iter().rev());
                }
                _ => done = candidate,
            }
            // `..` is applied lexically to what was resolved so far; above the top it leaves.
            while pending.last().is_some_and(|n| n == "..") {
                pending.pop();
                if !done.pop() {
                    return Ok(None);
                }
            }
        }
        Ok(Some(done))
    }

    /// The entry `rel` names after symlinks inside the tree are followed (`None`: missing, or
    /// leading out).
    pub fn stat(&self, rel: &Path, inside: Option<&Path>) -> std::io::Result<Option<Entry>> {
        match self.resolve(rel, inside)? {
            Some(resolved) => self.lstat(&resolved),
            None => Ok(None),
        }
    }
}

/// One lookup step: `name` in the merged directory made of `active` (topmost first). Returns
/// the entry and, for a directory, the layers that make it up.
fn step(active: &[PathBuf], name: &OsStr) -> std::io::Result<Option<(Entry, Vec<PathBuf>)>> {
    let mut found: Option<Entry> = None;
    let mut dirs = Vec::new();
    for layer in active {
        let path = layer.join(name);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        if is_whiteout(&meta) {
            break;
        }
        let kind = kind_of(&meta);
        if found.is_none() {
            found = Some(Entry {
                kind,
                real: path.clone(),
            });
        }
        if kind != EntryKind::Dir {
            // A non-directory hides everything below; below a directory it ends the merge.
            break;
        }
        let opaque = is_opaque(&path);
        dirs.push(path);
        if opaque {
            break;
        }
    }
    Ok(found.map(|entry| (entry, dirs)))
}

fn kind_of(meta: &std::fs::Metadata) -> EntryKind {
    let t = meta.file_type();
    if t.is_file() {
        EntryKind::File
    } else if t.is_dir() {
        EntryKind::Dir
    } else if t.is_symlink() {
        EntryKind::Symlink
    } else {
        EntryKind::Other
    }
}

/// A whiteout: the character device 0/0 overlayfs leaves where a name was deleted.
fn is_whiteout(meta: &std::fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// Whether a directory of an upper layer hides the same-named directories below it.
fn is_opaque(dir: &Path) -> bool {
    let mut value = [0u8; 4];
    matches!(
        rustix::fs::lgetxattr(dir, "user.overlay.opaque", &mut value),
        Ok(1) if value[0] == b'y'
    )
}

/// The components of a relative path made only of names (`.` components are skipped).
fn plain_components(rel: &Path) -> std::io::Result<Vec<&OsStr>> {
    let mut out = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{} is not a plain relative path", rel.display()),
                ));
            }
        }
    }
    Ok(out)
}
