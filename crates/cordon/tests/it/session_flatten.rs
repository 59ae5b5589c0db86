//! Flattening a session's frozen layers (`cordon session fork` past
//! `cordon_session::FLATTEN_DEPTH`) through the real binary, real overlays and the real
//! kernel sandbox: the merged layer must show exactly the tree the stack showed — deletions
//! (whiteouts), replaced directories (opaque), symlinks, modes, hard links, special files,
//! timestamps, untracked files and git history — whatever runs over the old layers keeps
//! them, and gc collects them once nothing stands on them.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use pretty_assertions::assert_eq;

use crate::session_fork::{AGENT_COMMIT, Fixture, ids};
use crate::support;

/// Forks stack at most this many layers (`cordon_session::FLATTEN_DEPTH`).
const FLATTEN_DEPTH: usize = 8;

/// Everything a program can tell about the tree: history, branch, index and status; every
/// name with its type, mode, symlink target and modification time (the top directory's
/// aside: it is the session's own upper layer's); every file's content, the git directory's
/// included; which names are one file (hard links).
const TREE: &str = "set -e
git log --format='%H %s'
git rev-parse --abbrev-ref HEAD
git status --porcelain=v1 -uall
git diff --cached --stat
find . -mindepth 1 -path ./.git -prune -o -printf '%p %y %m %l %T@\\n' | LC_ALL=C sort
find . -type f -print | LC_ALL=C sort | xargs sha256sum
if [ h1 -ef h2 ]; then echo h1 and h2 are one file; fi";

/// What each layer of the chain changes, bottom first: between them, every kind of entry
/// overlayfs records in an upper layer.
const LAYERS: [&str; FLATTEN_DEPTH] = [
    // Commits, a deletion of a base file, new directories, symlinks (one dangling), modes,
    // a hard link, a fifo, an old timestamp, an untracked file.
    "echo one >> a.txt && git add a.txt && $COMMIT -m one
git rm -q gone.txt && $COMMIT -m two
mkdir -p keep/sub && echo k > keep/sub/k.txt && echo x > keep/x.txt
ln -s a.txt link && ln -s missing dangling
printf '#!/bin/sh\\necho run\\n' > run.sh && chmod 755 run.sh && chmod 600 dir/b.txt
echo h > h1 && ln h1 h2
mkfifo pipe
echo old > old.txt && touch -d '2001-02-03 04:05:06' old.txt
echo untracked > untracked.txt",
    // A base directory replaced by a new one (opaque); a file of a lower layer deleted; a
    // staged file (committed in the next layer but one).
    "rm -rf dir && mkdir dir && echo only > dir/only.txt
rm keep/x.txt
echo staged > staged.txt && git add staged.txt",
    // A lower layer's directory replaced (opaque over a layer); a symlink re-pointed.
    "rm -rf keep && mkdir keep && echo fresh > keep/fresh.txt
rm link && ln -s dir/only.txt link
mkdir untracked2 && echo u > untracked2/u.txt",
    // A file replaced by a directory, a directory by a file; a commit of it all.
    "rm untracked.txt && mkdir untracked.txt && echo d > untracked.txt/inside
rm -rf untracked2 && echo now-a-file > untracked2
git add -A dir keep link run.sh h1 h2 old.txt && $COMMIT -m three",
    // A file deleted in a directory that a lower layer made opaque; a deleted base file back.
    "rm dir/only.txt
echo back > gone.txt",
    // A whole directory deleted (a whiteout over an opaque directory).
    "rm -rf dir",
    // The directory made again over its whiteout; an uncommitted change.
    "mkdir dir && echo again > dir/again.txt
echo seven >> a.txt",
    // A mode and a timestamp changed on what lower layers made; a staged file.
    "chmod 700 keep && touch -d '2002-01-01 00:00:00' keep/fresh.txt
echo staged > staged2.txt && git add staged2.txt",
];

fn script(layer: &str) -> String {
    format!("set -e\n{}", layer.replace("$COMMIT", AGENT_COMMIT))
}

fn tree(f: &Fixture, id: &str) -> String {
    let out = f.ok(&["session", "exec", id, "--read-only", "--", "sh", "-c", TREE]);
    String::from_utf8(out.stdout).unwrap()
}

fn layers_of(f: &Fixture, id: &str) -> Vec<String> {
    f.json(&["session", "show", id, "--json"])["layers"]
        .as_array()
        .map(|a| a.iter().map(|l| l.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// The frozen layers on disk (published ones: `layers/<id>`).
fn layer_dirs(f: &Fixture) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(f.home.path().join("layers"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.contains('.'))
        .collect();
    names.sort();
    names
}

/// A chain of forks of forks, each after one of [`LAYERS`]: the last fork is made twice
/// (`--count 2`); both stand on FLATTEN_DEPTH layers. Returns every session made, the two
/// last first.
fn chain(f: &Fixture) -> Vec<String> {
    let mut made = vec![f.create()];
    for (i, layer) in LAYERS.iter().enumerate() {
        let tip = made.last().unwrap().clone();
        f.sh(&tip, &script(layer));
        let count = if i + 1 == LAYERS.len() { 2 } else { 1 };
        let report = f.fork(&tip, count);
        assert_eq!(report["flattened"], serde_json::Value::Null, "{report}");
        made.extend(ids(&report));
    }
    let n = made.len();
    made.swap(0, n - 2);
    made.swap(1, n - 1);
    made
}

/// Forks of forks up to the flatten depth stack their layers; the next fork merges its
/// source's layers into one first. The source and the new fork then see exactly what the
/// source saw, a sibling over the old layers is untouched, and once no session stands on
/// the old layers, gc deletes them — the merged layer stands alone.
#[test]
fn a_fork_past_the_flatten_depth_merges_the_layers_and_shows_the_same_tree() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let made = chain(&f);
    let (source, sibling) = (made[0].clone(), made[1].clone());
    let old = layers_of(&f, &source);
    assert_eq!(old.len(), FLATTEN_DEPTH);
    assert_eq!(layers_of(&f, &sibling), old);
    f.sh(&source, "echo after > after.txt");
    let before = tree(&f, &source);
    let sibling_before = tree(&f, &sibling);
    // The fixture's states are all there.
    for seen in [
        "h1 and h2 are one file",
        "./pipe p 644",
        "./link l 777 dir/only.txt",
        "./dangling l 777 missing",
        "./run.sh f 755",
        "./dir/b.txt",
        "./untracked.txt/inside f",
        "./untracked2 f",
        "./keep d 700",
        "./old.txt f 644",
        "?? after.txt",
        "A  staged2.txt",
        " M a.txt",
    ] {
        let expected = !seen.starts_with("./dir/b.txt");
        assert_eq!(before.contains(seen), expected, "{seen:?} in:\n{before}");
    }

    let report = f.fork(&source, 1);
    let flattened = &report["flattened"];
    assert_eq!(
        flattened["replaced"].as_array().unwrap().len(),
        FLATTEN_DEPTH,
        "{report}"
    );
    assert_eq!(report["depth"], 2, "{report}");
    let merged = flattened["layer"].as_str().unwrap().to_owned();
    let fork = ids(&report).remove(0);
    let now = layers_of(&f, &source);
    assert_eq!(now.len(), 2);
    assert_eq!(now[1], merged);
    assert_eq!(layers_of(&f, &fork), now);
    assert_eq!(tree(&f, &source), before);
    assert_eq!(tree(&f, &fork), before);
    // The sibling still stands on the old layers, and sees what it saw.
    assert_eq!(layers_of(&f, &sibling), old);
    assert_eq!(tree(&f, &sibling), sibling_before);

    // Writes after the flatten: on their own layers, as ever.
    f.sh(&fork, "echo mine > mine.txt && rm a.txt");
    assert_eq!(tree(&f, &source), before);

    // Everyone else gone, gc keeps only the layers the two stand on.
    for id in &made[1..] {
        f.ok(&["session", "remove", "--discard", id]);
    }
    f.ok(&["gc"]);
    let mut expected = now.clone();
    expected.sort();
    assert_eq!(layer_dirs(&f), expected);
    assert_eq!(tree(&f, &source), before);
    // A pull of the source's history still works from the merged layer.
    f.sh(
        &source,
        &format!("git add -A after.txt && {AGENT_COMMIT} -m after"),
    );
    f.ok(&["session", "pull", &source]);
    let log = support::git(f.repo.path(), &["log", "--format=%s", "main"]);
    assert_eq!(log, "after\nthree\ntwo\none\ninit\n");
}

/// A chain of 40 forks of forks, past the 32 layers a tree may stand on: every fork works,
/// no stack grows past the flatten depth, and the last sees every write and commit.
#[test]
fn forks_of_forks_forty_deep_work() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let mut tip = f.create();
    let mut flattens = 0;
    for i in 0..40 {
        f.sh(
            &tip,
            &format!("echo {i} > f{i}.txt && git add f{i}.txt && {AGENT_COMMIT} -m c{i}"),
        );
        let report = f.fork(&tip, 1);
        let depth = report["depth"].as_u64().unwrap() as usize;
        assert!(depth <= FLATTEN_DEPTH, "{report}");
        if !report["flattened"].is_null() {
            flattens += 1;
        }
        tip = ids(&report).remove(0);
    }
    assert!(flattens >= 40 / FLATTEN_DEPTH, "{flattens} flattens");
    let all: String = (0..40).map(|i| format!("{i}\n")).collect();
    let script = "for i in $(seq 0 39); do cat f$i.txt; done";
    assert_eq!(f.sh(&tip, script), all);
    let log = f.sh(
        &tip,
        "git log --format=%s | head -3; git log --oneline | wc -l",
    );
    assert_eq!(log, "c39\nc38\nc37\n41\n");
}

/// A program running over the layers while a fork flattens them keeps them: the session
/// lets go of the old layers only once it has ended (gc), and the program reads them
/// whole meanwhile.
#[test]
fn a_reader_running_during_a_flatten_keeps_the_old_layers_until_it_ends() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let mut tip = f.create();
    for i in 0..FLATTEN_DEPTH {
        f.sh(&tip, &format!("echo {i} > f{i}.txt"));
        tip = ids(&f.fork(&tip, 1)).remove(0);
    }
    let old = layers_of(&f, &tip);
    assert_eq!(old.len(), FLATTEN_DEPTH);
    let all: String = (0..FLATTEN_DEPTH).map(|i| format!("{i}\n")).collect();
    let cat = format!(
        "for i in $(seq 0 {}); do cat f$i.txt; done",
        FLATTEN_DEPTH - 1
    );
    let mut reader = f
        .command(&[
            "session",
            "exec",
            &tip,
            "--read-only",
            "--",
            "sh",
            "-c",
            &format!("{cat} >/dev/null; echo ready; read go; {cat}"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = reader.stdin.take().unwrap();
    let mut lines = BufReader::new(reader.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");

    f.sh(&tip, "echo top > top.txt");
    let report = f.fork(&tip, 1);
    assert!(!report["flattened"].is_null(), "{report}");
    let holds = |layer: &str| {
        f.home
            .path()
            .join("layers")
            .join(format!("{layer}.holds"))
            .join(format!("session-{tip}"))
    };
    // The reader still runs over the old layers: the session keeps them, gc too.
    f.ok(&["gc"]);
    for layer in &old {
        assert!(holds(layer).exists(), "{layer} let go of under a reader");
        assert!(f.home.path().join("layers").join(layer).is_dir());
    }
    writeln!(stdin, "go").unwrap();
    drop(stdin);
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert_eq!(rest.join("\n") + "\n", all);
    assert!(reader.wait().unwrap().success());
    // Ended: the next gc lets go of them; what the session shows is unchanged.
    f.ok(&["gc"]);
    for layer in &old {
        assert!(!holds(layer).exists(), "{layer} still held");
    }
    assert_eq!(f.sh(&tip, &format!("{cat}; cat top.txt")), all + "top\n");
}

/// A program cannot forge overlayfs's marks: its own `user.overlay.opaque` on a directory
/// (stored escaped by overlayfs) survives the merge as its own attribute, and the directory
/// still shows the base's files through.
#[test]
fn a_programs_own_overlay_attribute_does_not_make_a_directory_opaque() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let set = "python3 -c \"import os; os.setxattr('dir', 'user.overlay.opaque', b'y')\"";
    let show = "ls dir; python3 -c \"import os; print(os.getxattr('dir', 'user.overlay.opaque'))\"";
    let mut tip = f.create();
    let mut scripts = vec![format!("{set} && echo mine > dir/mine.txt")];
    scripts.extend((0..2).map(|i| format!("echo {i} > f{i}.txt")));
    let mut report = serde_json::Value::Null;
    for script in &scripts {
        f.sh(&tip, script);
        let out = f
            .command(&["session", "fork", &tip, "--json"])
            .env("CORDON_FLATTEN_DEPTH", "2")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        report = serde_json::from_slice(&out.stdout).unwrap();
        tip = ids(&report).remove(0);
    }
    assert!(!report["flattened"].is_null(), "{report}");
    assert_eq!(f.sh(&tip, show), "b.txt\nc.txt\nmine.txt\nb'y'\n");
}

/// What a merge cut short leaves behind is collected by `cordon gc`: a merge still under its
/// hidden name whose builder is gone, and a merged layer published and held by a session
/// whose record does not name it yet (the crash between publishing and the record).
#[test]
fn gc_collects_what_an_interrupted_flatten_left() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let source = f.create();
    f.sh(&source, "echo s > s.txt");
    let fork = ids(&f.fork(&source, 1)).remove(0);
    let before = tree(&f, &fork);
    let stands_on = layers_of(&f, &fork);
    let layers = f.home.path().join("layers");
    // A build whose process is gone (no process started at tick 1 has this pid now).
    let build = layers.join(".flatten-abcdefgh-4194303-1");
    std::fs::create_dir_all(build.join("dir")).unwrap();
    std::fs::write(build.join("dir/f"), "half").unwrap();
    // A merged layer the fork holds but its record never named.
    let orphan = layers.join("zzzzzzzz");
    std::fs::create_dir_all(&orphan).unwrap();
    std::fs::write(orphan.join("f"), "merged").unwrap();
    let holds = layers.join("zzzzzzzz.holds");
    std::fs::create_dir_all(&holds).unwrap();
    let proof = f.home.path().join("sessions").join(&fork).join("layer");
    std::fs::write(
        holds.join(format!("session-{fork}")),
        proof.to_str().unwrap(),
    )
    .unwrap();

    f.ok(&["gc"]);
    assert!(!build.exists(), "the abandoned build is still there");
    assert!(
        !orphan.exists() && !holds.exists(),
        "the unnamed layer is still there"
    );
    let mut expected = stands_on.clone();
    expected.sort();
    assert_eq!(layer_dirs(&f), expected);
    assert_eq!(tree(&f, &fork), before);
}
