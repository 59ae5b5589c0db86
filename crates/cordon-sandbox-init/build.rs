//! Gives the helper a build identity: a hash of the sources that define what it does and the
//! plan it reads (this crate's and `cordon-types`'). cordon puts its own copy of the identity
//! in every plan; a `cordon-sandbox-init` executable from another build (an older install left
//! next to a newer `cordon`) sees the difference and hands over to cordon's own entry point
//! instead of running code cordon did not ship with.

use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest);
    let mut files = Vec::new();
    for dir in [root.join("src"), root.join("../cordon-types/src")] {
        println!("cargo:rerun-if-changed={}", dir.display());
        collect(&dir, &mut files);
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.toml").display()
    );
    files.push(root.join("Cargo.toml"));
    files.sort();
    // FNV-1a over every file's relative name and bytes: stable, and enough to tell builds of
    // different sources apart (this is an identity, not a defence against forgery: whoever
    // can write next to cordon can replace cordon too).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for file in &files {
        let name = file.strip_prefix(root).unwrap_or(file);
        feed(name.to_string_lossy().as_bytes());
        feed(&std::fs::read(file).unwrap_or_default());
    }
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=CORDON_HELPER_BUILD={version}-{hash:016x}");
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
