//! Which tool a stage runs, read from its argv — never guessed from its output.

use super::Sink;
use crate::tree::Dir;

/// A tool whose output cordon parses into findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `cargo test`: libtest's failures, and rustc's diagnostics (human or JSON).
    CargoTest,
    /// `cargo nextest run`: nextest's failures, and rustc's diagnostics.
    CargoNextest,
    /// `cargo build` / `check` / `clippy` / `rustc`: rustc's and clippy's diagnostics (human
    /// or `--message-format=json`).
    Rustc,
    /// `cargo fmt --check` / `rustfmt --check`.
    Rustfmt,
    /// `pytest` / `python -m pytest`.
    Pytest,
    /// `python -m compileall` / `py_compile`: syntax errors.
    PythonCompile,
    /// TAP producers: `node --test` (node's test runner), `tape`, `tap`.
    Tap,
    /// `node --check`: syntax errors.
    NodeCheck,
    /// `tsc`: type errors.
    Tsc,
    /// `eslint` (its default "stylish" format).
    Eslint,
    /// `jest`.
    Jest,
    /// `vitest`.
    Vitest,
    /// `mocha` (its default spec reporter).
    Mocha,
    /// `ruff check`.
    Ruff,
    /// `mypy` / `python -m mypy`.
    Mypy,
    /// `go test`.
    GoTest,
    /// `go vet`.
    GoVet,
    /// `go build`.
    GoBuild,
    /// Anything else: no findings.
    Unknown,
}

/// How many scripts deep `npm run a` → `npm run b` is followed.
const MAX_SCRIPT_DEPTH: u8 = 3;

/// Most bytes of a `package.json` read to find a script.
const MAX_MANIFEST: u64 = 1 << 20;

impl Tool {
    /// The tool `argv` runs in `cwd` (whose `package.json` names the scripts a package
    /// manager runs): for a script, its own command's (the first a known tool runs).
    pub fn identify(argv: &[String], cwd: &Dir) -> Tool {
        Self::identify_all(argv, cwd)
            .into_iter()
            .find(|t| *t != Tool::Unknown)
            .unwrap_or(Tool::Unknown)
    }

    /// Every tool whose output `argv` may print: the program's own, or for a package
    /// manager's script every command of the script (`eslint . && node --test`), then of its
    /// lifecycle hooks (`pretest`, `posttest`: `npm test` runs them in the same stage, so
    /// that a lint run by `pretest` is parsed as lint there). Known tools only, each once;
    /// empty when none is known.
    pub fn identify_all(argv: &[String], cwd: &Dir) -> Vec<Tool> {
        let mut tools = Vec::new();
        for tool in Self::tools_at_depth(argv, cwd, 0) {
            if tool != Tool::Unknown && !tools.contains(&tool) {
                tools.push(tool);
            }
        }
        tools
    }

    /// The tools of `argv`: one for a program, the script's for a package manager.
    fn tools_at_depth(argv: &[String], cwd: &Dir, depth: u8) -> Vec<Tool> {
        let args = unwrapped(argv);
        match args.split_first() {
            Some((first, rest))
                if matches!(program(first), "npm" | "pnpm" | "yarn" | "bun")
                    && depth < MAX_SCRIPT_DEPTH =>
            {
                script_tools(rest, cwd, depth)
            }
            _ => vec![Self::identify_at_depth(argv, cwd, depth)],
        }
    }

    fn identify_at_depth(argv: &[String], cwd: &Dir, depth: u8) -> Tool {
        let args = unwrapped(argv);
        let Some(first) = args.first() else {
            return Tool::Unknown;
        };
        let rest = &args[1..];
        let has = |flag: &str| rest.contains(&flag);
        match program(first) {
            "cargo" => {
                match rest
                    .iter()
                    .copied()
                    .find(|a| !a.starts_with('-') && !a.starts_with('+'))
                {
                    Some("test" | "t") => Tool::CargoTest,
                    Some("nextest") => Tool::CargoNextest,
                    Some("build" | "b" | "check" | "c" | "clippy" | "rustc") => Tool::Rustc,
                    Some("fmt") => Tool::Rustfmt,
                    _ => Tool::Unknown,
                }
            }
            "rustc" | "clippy-driver" => Tool::Rustc,
            "rustfmt" => Tool::Rustfmt,
            "pytest" | "py.test" => Tool::Pytest,
            p if p.starts_with("python") => {
                match rest
                    .iter()
                    .position(|a| *a == "-m")
                    .and_then(|i| rest.get(i + 1))
                {
                    Some(&"pytest") => Tool::Pytest,
                    Some(&("compileall" | "py_compile")) => Tool::PythonCompile,
                    Some(&"mypy") => Tool::Mypy,
                    _ => Tool::Unknown,
                }
            }
            "node" if has("--test") => Tool::Tap,
            "node" if has("--check") || has("-c") => Tool::NodeCheck,
            "tape" | "tap" => Tool::Tap,
            "tsc" | "vue-tsc" => Tool::Tsc,
            "eslint" => Tool::Eslint,
            "jest" => Tool::Jest,
            "vitest" => Tool::Vitest,
            "mocha" => Tool::Mocha,
            "ruff" => Tool::Ruff,
            "mypy" | "dmypy" => Tool::Mypy,
            "go" => match rest.iter().copied().find(|a| !a.starts_with('-')) {
                Some("test") => Tool::GoTest,
                Some("vet") => Tool::GoVet,
                Some("build" | "install") => Tool::GoBuild,
                _ => Tool::Unknown,
            },
            // A script may run another (`"test": "npm run tests-only"`): followed twice.
            "npm" | "pnpm" | "yarn" | "bun" if depth < MAX_SCRIPT_DEPTH => {
                script_tools(rest, cwd, depth)
                    .into_iter()
                    .find(|t| *t != Tool::Unknown)
                    .unwrap_or(Tool::Unknown)
            }
            _ => Tool::Unknown,
        }
    }

    /// Runs this tool's parsers over `text` (ANSI escapes already stripped).
    pub(crate) fn parse(self, text: &str, sink: &mut Sink) {
        match self {
            Tool::CargoTest => {
                super::libtest::parse(text, sink);
                super::rustc::parse(text, sink);
                super::rustc_json::parse(text, sink);
            }
            Tool::CargoNextest => {
                super::nextest::parse(text, sink);
                super::rustc::parse(text, sink);
                super::rustc_json::parse(text, sink);
            }
            Tool::Rustc => {
                super::rustc::parse(text, sink);
                super::rustc_json::parse(text, sink);
            }
            Tool::Rustfmt => super::rustfmt::parse(text, sink),
            Tool::Pytest => super::pytest::parse(text, sink),
            Tool::PythonCompile => super::python_syntax::parse(text, sink),
            Tool::Tap => super::tap::parse(text, sink),
            Tool::NodeCheck => super::node_check::parse(text, sink),
            Tool::Tsc => super::tsc::parse(text, sink),
            Tool::Eslint => super::eslint::parse(text, sink),
            Tool::Jest => super::jest::parse(text, sink),
            Tool::Vitest => super::vitest::parse(text, sink),
            Tool::Mocha => super::mocha::parse(text, sink),
            Tool::Ruff => super::ruff::parse(text, sink),
            Tool::Mypy => super::mypy::parse(text, sink),
            Tool::GoTest => super::go::parse_test(text, sink),
            Tool::GoVet => super::go::parse_vet(text, sink),
            Tool::GoBuild => super::go::parse_build(text, sink),
            Tool::Unknown => {}
        }
    }
}

/// The program's name without its directory.
fn program(arg: &str) -> &str {
    arg.rsplit('/').next().unwrap_or(arg)
}

/// `argv` without the wrappers that run the real tool: `env A=B prog`, `npx prog`, `A=B prog`
/// (in a script), coverage runners.
fn unwrapped(argv: &[String]) -> Vec<&str> {
    let mut args: Vec<&str> = argv.iter().map(String::as_str).collect();
    loop {
        match args.first().map(|a| program(a)) {
            Some("env" | "npx" | "exec" | "cross-env" | "nyc" | "c8") => {
                args.remove(0);
                while args.first().is_some_and(|a| a.starts_with('-')) {
                    args.remove(0);
                }
            }
            Some(a) if a.contains('=') && !a.starts_with('-') => {
                args.remove(0);
            }
            _ => break,
        }
    }
    args
}

/// The tools behind `npm run NAME` / `npm test` / `pnpm NAME` / `yarn NAME`: the commands of
/// the script in `package.json` in `cwd` (or, for a workspace-wide run, of every package's),
/// then of its `preNAME` and `postNAME` hooks, which the package manager runs in the same
/// stage.
fn script_tools(rest: &[&str], cwd: &Dir, depth: u8) -> Vec<Tool> {
    let words: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|a| !a.starts_with('-'))
        .collect();
    let name = match words.as_slice() {
        ["run" | "run-script", name, ..] => *name,
        ["test" | "t", ..] => "test",
        [name, ..] if !matches!(*name, "install" | "ci" | "exec" | "dlx" | "x") => name,
        _ => return Vec::new(),
    };
    let dirs: Vec<Dir> = if script(cwd, name).is_some() {
        vec![cwd.clone()]
    } else {
        crate::target::node_packages(cwd)
            .unwrap_or_default()
            .iter()
            .map(|p| cwd.join(&p.dir))
            .collect()
    };
    let mut tools = Vec::new();
    for names in [name.to_owned(), format!("pre{name}"), format!("post{name}")] {
        for dir in &dirs {
            let Some(text) = script(dir, &names) else {
                continue;
            };
            let argv = shell_words::split(&text).unwrap_or_default();
            for command in commands(&argv) {
                tools.extend(Tool::tools_at_depth(&command, dir, depth + 1));
            }
        }
    }
    tools
}

/// The commands of a script's words: split at `&&`, `||`, `;` and `|`.
fn commands(words: &[String]) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    for word in words {
        match word.as_str() {
            "&&" | "||" | ";" | "|" => out.push(Vec::new()),
            w if w.ends_with(';') => {
                if let Some(last) = out.last_mut() {
                    last.push(w.trim_end_matches(';').to_owned());
                }
                out.push(Vec::new());
            }
            _ => {
                if let Some(last) = out.last_mut() {
                    last.push(word.clone());
                }
            }
        }
    }
    out.retain(|c| !c.is_empty());
    out
}

/// `scripts[name]` of `dir/package.json`.
fn script(dir: &Dir, name: &str) -> Option<String> {
    let text = dir.join("package.json").read_limited(MAX_MANIFEST).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value.get("scripts")?.get(name)?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn tool(argv: &[&str]) -> Tool {
        let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
        Tool::identify(&argv, &Dir::host(Path::new("/nonexistent")))
    }

    #[test]
    fn tools_from_argv() {
        assert_eq!(
            tool(&["cargo", "test", "--offline", "-p", "a"]),
            Tool::CargoTest
        );
        assert_eq!(tool(&["cargo", "+nightly", "clippy"]), Tool::Rustc);
        assert_eq!(tool(&["cargo", "nextest", "run"]), Tool::CargoNextest);
        assert_eq!(tool(&["cargo", "fmt", "--all", "--check"]), Tool::Rustfmt);
        assert_eq!(tool(&["cargo", "metadata"]), Tool::Unknown);
        assert_eq!(tool(&["python3", "-m", "pytest", "-q"]), Tool::Pytest);
        assert_eq!(
            tool(&["/usr/bin/python3", "-m", "compileall", "-q", "."]),
            Tool::PythonCompile
        );
        assert_eq!(tool(&["python3", "-c", "import pytest"]), Tool::Unknown);
        assert_eq!(tool(&["node", "--test"]), Tool::Tap);
        assert_eq!(tool(&["node", "--check", "index.js"]), Tool::NodeCheck);
        assert_eq!(tool(&["node", "index.js"]), Tool::Unknown);
        assert_eq!(tool(&["npx", "tsc", "--noEmit"]), Tool::Tsc);
        assert_eq!(tool(&["env", "CI=1", "eslint", "."]), Tool::Eslint);
        assert_eq!(tool(&["sh", "-c", "cargo test"]), Tool::Unknown, "no guess");
        assert_eq!(tool(&["go", "test", "./..."]), Tool::GoTest);
        assert_eq!(tool(&["go", "vet", "./..."]), Tool::GoVet);
        assert_eq!(tool(&["ruff", "check", "."]), Tool::Ruff);
        assert_eq!(tool(&["python3", "-m", "mypy", "."]), Tool::Mypy);
        assert_eq!(tool(&["npx", "jest", "--ci"]), Tool::Jest);
        assert_eq!(tool(&["vitest", "run"]), Tool::Vitest);
        assert_eq!(tool(&["mocha"]), Tool::Mocha);
        assert_eq!(tool(&[]), Tool::Unknown);
    }

    #[test]
    fn package_scripts_name_their_tool() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"scripts":{"test":"NODE_ENV=test node --test","typecheck":"tsc --noEmit","lint":"eslint . && prettier --check ."}}"#,
        )
        .unwrap();
        let at = |argv: &[&str]| {
            let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
            Tool::identify(&argv, &Dir::host(dir.path()))
        };
        assert_eq!(at(&["npm", "run", "--silent", "test"]), Tool::Tap);
        assert_eq!(at(&["npm", "test"]), Tool::Tap);
        assert_eq!(at(&["pnpm", "run", "typecheck"]), Tool::Tsc);
        assert_eq!(at(&["yarn", "typecheck"]), Tool::Tsc);
        assert_eq!(at(&["npm", "run", "lint"]), Tool::Eslint);
        assert_eq!(at(&["npm", "run", "missing"]), Tool::Unknown);
        assert_eq!(at(&["npm", "ci"]), Tool::Unknown);
        // minimist 1.2.8: "test": "npm run tests-only", "tests-only": "nyc tape 'test/**/*.js'".
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"scripts":{"test":"npm run tests-only","tests-only":"nyc tape 'test/**/*.js'","loop":"npm run loop"}}"#,
        )
        .unwrap();
        assert_eq!(at(&["npm", "test"]), Tool::Tap);
        assert_eq!(at(&["npm", "run", "loop"]), Tool::Unknown, "a loop ends");
    }

    #[test]
    fn a_scripts_commands_and_lifecycle_hooks_name_their_tools_too() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"scripts":{"pretest":"npm run lint","test":"node --test; tsc --noEmit","lint":"eslint .","posttest":"echo done"}}"#,
        )
        .unwrap();
        let argv: Vec<String> = ["npm", "run", "--silent", "test"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let root = Dir::host(dir.path());
        assert_eq!(
            Tool::identify_all(&argv, &root),
            [Tool::Tap, Tool::Tsc, Tool::Eslint]
        );
        assert_eq!(Tool::identify(&argv, &root), Tool::Tap, "the script's own");
        let lint: Vec<String> = ["npm", "run", "lint"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(Tool::identify_all(&lint, &root), [Tool::Eslint]);
    }
}
