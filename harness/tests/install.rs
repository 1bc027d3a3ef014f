//! The README's install line gives a `chaos` that works without the
//! repository (issue 26 item 2): `cargo install --locked --path harness`,
//! then, from a folder with no scenarios in it, `chaos run --target
//! runtime-ledger` runs the suite built into the binary and passes, and
//! `chaos scenarios export DIR` writes the suite out to run and edit.
//!
//! The install is the README's command with `--debug` and this workspace's
//! target folder, so it links the build the suite already made instead of
//! compiling the release profile from nothing; what is checked (the
//! embedded scenarios, the installed binary outside the repository) is the
//! same in either profile.

mod common;

use std::path::Path;
use std::process::Command;

fn run(command: &mut Command) -> (bool, String, String) {
    let output = command.output().expect("the command starts");
    let (stdout, stderr) = common::text(&output);
    (output.status.success(), stdout, stderr)
}

#[test]
fn an_installed_chaos_runs_the_built_in_suite_from_anywhere() {
    let root = common::repo_root();
    let home = common::fresh_path("install-root");
    let (ok, _, stderr) = run(Command::new(env!("CARGO"))
        .args([
            "install", "--locked", "--debug", "--quiet", "--path", "harness", "--root",
        ])
        .arg(&home)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .current_dir(&root));
    assert!(ok, "cargo install failed:\n{stderr}");
    let chaos = home.join("bin/chaos");
    assert!(chaos.is_file(), "{} was not installed", chaos.display());

    // A folder with no scenarios/ and no targets/: only the binary.
    let elsewhere = common::fresh_path("install-elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let suite = std::fs::read_dir(root.join("scenarios"))
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|ext| ext == "toml")
        })
        .count();

    let (ok, stdout, stderr) = run(Command::new(&chaos)
        .args([
            "run",
            "--target",
            "runtime-ledger",
            "--seeds",
            "20",
            "--emit",
            "json",
        ])
        .current_dir(&elsewhere));
    assert!(ok, "chaos run failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("{suite} scenario(s) (built in) x 1 target(s)")),
        "{stdout}"
    );
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(elsewhere.join("reports/latest/report.json")).unwrap(),
    )
    .unwrap();
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), suite, "a cell per built-in scenario");
    assert!(
        cells.iter().all(|cell| cell["verdict"] == "pass"),
        "{stdout}"
    );

    // A rerun command as chaos prints it names `scenarios/...`: outside a
    // clone it is read from the binary, and said so.
    let (ok, stdout, stderr) = run(Command::new(&chaos)
        .args([
            "run",
            "scenarios/lost-response-keyed.toml",
            "--target",
            "fresh-key",
            "--seed",
            "0",
            "--emit",
            "json",
        ])
        .current_dir(&elsewhere));
    assert!(
        !ok,
        "fresh-key fails lost-response-keyed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("FAIL"), "{stdout}");
    assert!(
        stderr.contains("using the copy built into chaos"),
        "{stderr}"
    );

    // Exported, then run from the files.
    let (ok, stdout, stderr) = run(Command::new(&chaos)
        .args(["scenarios", "export", "mine"])
        .current_dir(&elsewhere));
    assert!(ok, "export failed:\n{stdout}\n{stderr}");
    let exported = elsewhere.join("mine/three-charges.toml");
    assert_eq!(
        std::fs::read_to_string(&exported).unwrap(),
        std::fs::read_to_string(root.join("scenarios/three-charges.toml")).unwrap()
    );
    assert!(Path::new(&elsewhere.join("mine/posture/README.md")).is_file());
    // A copy under another name: the row's name is the file's, so the
    // table shows which file ran.
    std::fs::copy(&exported, elsewhere.join("mine/edited-three-charges.toml")).unwrap();
    let (_, stdout, stderr) = run(Command::new(&chaos).args(["list"]).current_dir(&elsewhere));
    assert!(
        stdout.contains("scenarios built into chaos"),
        "{stdout}\n{stderr}"
    );
    let (ok, stdout, stderr) = run(Command::new(&chaos)
        .args([
            "run",
            "mine/edited-three-charges.toml",
            "--target",
            "runtime-ledger",
            "--seeds",
            "5",
            "--emit",
            "json",
        ])
        .current_dir(&elsewhere));
    assert!(ok, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("edited-three-charges"),
        "the edited file runs: {stdout}"
    );
    assert!(!stderr.contains("built into chaos"), "{stderr}");

    let _ = std::fs::remove_dir_all(&home);
    let _ = std::fs::remove_dir_all(&elsewhere);
}
