//! go test, go vet, go build.

use super::*;
use pretty_assertions::assert_eq;

#[test]
fn go_test_vet_and_build() {
    let test = findings(Tool::GoTest, include_str!("testdata/gotest.stdout"), "gop");
    assert_eq!(
        summary(&test),
        vec![
            (
                s("TestAdd"),
                s("add_test.go:7"),
                "Add(2, 3) = 6, want 5".into()
            ),
            (
                s("TestSub/inner"),
                s("add_test.go:19"),
                "inner broke".into()
            ),
        ]
    );
    let vet = findings(Tool::GoVet, include_str!("testdata/govet.stderr"), "gop");
    assert_eq!(
        summary(&vet),
        vec![(
            None,
            s("add.go:10:9"),
            "fmt.Sprintf format %d has arg \"n\" of wrong type string".into()
        )]
    );
    assert_eq!(vet[0].kind, FindingKind::Lint);
    let build = findings(
        Tool::GoBuild,
        include_str!("testdata/gobuild.stderr"),
        "gop",
    );
    let under_test = findings(
        Tool::GoTest,
        include_str!("testdata/gotest-build.out"),
        "gop",
    );
    let expected = vec![(
        None,
        s("broken.go:4:9"),
        "cannot use \"x\" (untyped string constant) as int value in return statement".to_owned(),
    )];
    assert_eq!(summary(&build), expected);
    assert_eq!(
        summary(&under_test),
        expected,
        "go test's build errors, once"
    );
    assert_eq!(under_test[0].kind, FindingKind::Compile);
    // Without the package line, the bare file name is not passed off as a path.
    let cut = findings(
        Tool::GoTest,
        "--- FAIL: TestAdd (0.00s)\n    add_test.go:7: bad\n",
        "gop",
    );
    assert_eq!(
        summary(&cut),
        vec![(s("TestAdd"), None, "add_test.go:7: bad".into())]
    );
}
