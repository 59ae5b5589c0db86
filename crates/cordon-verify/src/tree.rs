//! [`Dir`]: a directory of the tree under verification, as cordon reads it on the host.
//!
//! An overlay workspace is never mounted on the host: its files are read from its layers
//! (upper, then base) with overlayfs's rules ([`cordon_git::Layers`]). A git worktree, or any
//! plain directory, is the tree of one layer. Either way a symlink is followed only within the
//! tree: a candidate's `Cargo.toml` that links to `/etc/passwd` reads as missing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cordon_git::{EntryKind, Layers};

/// A directory (or file) of a tree: the tree, and a path relative to its top.
#[derive(Debug, Clone)]
pub struct Dir {
    tree: Arc<Tree>,
    rel: PathBuf,
}

#[derive(Debug)]
struct Tree {
    layers: Layers,
    /// Where programs see the tree (an absolute symlink under it stays inside).
    inside: Option<PathBuf>,
}

/// The largest file [`Dir::read_to_string`] reads: manifests, not data.
const MAX_READ: u64 = 16 << 20;

impl Dir {
    /// The top of a plain directory.
    pub fn host(root: &Path) -> Dir {
        Dir::tree(Layers::dir(root.to_owned()), Some(root.to_owned()))
    }

    /// The top of a tree made of `layers`; `inside` is where its programs see it.
    pub fn tree(layers: Layers, inside: Option<PathBuf>) -> Dir {
        Dir {
            tree: Arc::new(Tree { layers, inside }),
            rel: PathBuf::new(),
        }
    }

    /// A path below this one (`..` and absolute paths lead nowhere).
    pub fn join(&self, rel: impl AsRef<Path>) -> Dir {
        let mut path = self.rel.clone();
        for component in rel.as_ref().components() {
            match component {
                std::path::Component::Normal(name) => path.push(name),
                std::path::Component::ParentDir => {
                    path.pop();
                }
                _ => {}
            }
        }
        Dir {
            tree: Arc::clone(&self.tree),
            rel: path,
        }
    }

    /// The path relative to the top of the tree.
    pub fn rel(&self) -> &Path {
        &self.rel
    }

    /// The path relative to the top with symlinks inside the tree resolved (`None`: a
    /// symlink leads out of it).
    pub fn resolved(&self) -> Option<PathBuf> {
        self.tree
            .layers
            .resolve(&self.rel, self.tree.inside.as_deref())
            .ok()
            .flatten()
    }

    fn kind(&self) -> Option<EntryKind> {
        self.tree
            .layers
            .stat(&self.rel, self.tree.inside.as_deref())
            .ok()
            .flatten()
            .map(|e| e.kind)
    }

    /// Whether it is a regular file (symlinks inside the tree followed).
    pub fn is_file(&self) -> bool {
        self.kind() == Some(EntryKind::File)
    }

    /// Whether it is a directory (symlinks inside the tree followed).
    pub fn is_dir(&self) -> bool {
        self.kind() == Some(EntryKind::Dir)
    }

    /// The file's text (at most 16 MiB).
    pub fn read_to_string(&self) -> std::io::Result<String> {
        self.read_limited(MAX_READ)
    }

    /// The file's text, at most `max` bytes of it.
    pub fn read_limited(&self, max: u64) -> std::io::Result<String> {
        use std::io::Read;
        let entry = self
            .tree
            .layers
            .stat(&self.rel, self.tree.inside.as_deref())?
            .filter(|e| e.kind == EntryKind::File)
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{}: no such file", self.rel.display()),
                )
            })?;
        let mut text = String::new();
        std::fs::File::open(&entry.real)?
            .take(max)
            .read_to_string(&mut text)?;
        Ok(text)
    }

    /// The entries of the directory: each name and whether it is a directory (symlinks not
    /// followed, as `DirEntry::file_type`), sorted; empty when it is not a directory.
    pub fn entries(&self) -> Vec<(String, bool)> {
        let Some(rel) = self.resolved() else {
            return Vec::new();
        };
        match self.tree.layers.read_dir(&rel) {
            Ok(Some(entries)) => entries
                .into_iter()
                .filter_map(|(name, kind)| Some((name.into_string().ok()?, kind == EntryKind::Dir)))
                .collect(),
            _ => Vec::new(),
        }
    }
}
