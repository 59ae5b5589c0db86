//! The MCP clients of the tests: the official Python SDK (`mcp` from PyPI) and the official
//! TypeScript SDK (`@modelcontextprotocol/sdk` from npm), installed by `scripts/test` into
//! `target/test-tools` and named by `CORDON_TEST_MCP_PYTHON` and `CORDON_TEST_MCP_TYPESCRIPT`;
//! a machine without them fails these tests. And the fixture they verify: a Python project
//! whose `cordon.toml` compiles and tests it, and a patch that breaks a test.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The Python interpreter of the virtualenv holding the official MCP SDK.
pub fn python() -> PathBuf {
    tool(
        "CORDON_TEST_MCP_PYTHON",
        "the MCP Python SDK (mcp from PyPI)",
    )
}

/// The directory of the official TypeScript SDK's package.
pub fn typescript_sdk() -> PathBuf {
    tool(
        "CORDON_TEST_MCP_TYPESCRIPT",
        "the MCP TypeScript SDK (@modelcontextprotocol/sdk from npm)",
    )
}

fn tool(variable: &str, what: &str) -> PathBuf {
    let path = std::env::var_os(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "{variable} is not set: run the tests through scripts/test, which installs {what} \
             into target/test-tools"
            )
        });
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// The clients' scripts.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/mcp")
        .join(name)
}

/// `client.py TRANSPORT SCENARIOS` with `env` as its `MCP_ENV`; fails the test with the
/// client's reason unless it passed. Returns its standard output.
pub fn python_client(transport: &str, scenarios: &str, env: &Value) -> String {
    let out = Command::new(python())
        .arg(script("client.py"))
        .args([transport, scenarios])
        .env("MCP_ENV", env.to_string())
        .env("CORDON_BIN", env!("CARGO_BIN_EXE_cordon"))
        .env("CORDON_HOME", crate::support::test_home())
        .output()
        .expect("the Python client starts");
    passed(&out, &format!("client.py {transport} {scenarios}"))
}

/// The client's standard output, or the test fails with what it said.
pub fn passed(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

const CORDON_TOML: &str = r#"
[[stage]]
name = "compile"
category = "compile"
run = ["python3", "-m", "compileall", "-q", "demo"]

[[stage]]
name = "pytest"
category = "test"
run = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
"#;

const TESTS: &str = "import sys, pathlib
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent))
import demo


def test_add():
    assert demo.add(2, 3) == 5


def test_square():
    assert demo.add(2, 2) == 4
";

/// A repository `dir/repo` of a Python project whose two stages pass at HEAD (and fail with
/// `client.py`'s patch: `tests/test_demo.py:7`).
pub fn project(dir: &Path) -> PathBuf {
    crate::support::repo_with(
        dir,
        &[
            ("cordon.toml", CORDON_TOML),
            ("demo/__init__.py", "def add(a, b):\n    return a + b\n"),
            ("tests/test_demo.py", TESTS),
        ],
    )
}
