//! An MCP server's first contact with chaos (issue 23, item 5), live:
//! `chaos init-target --mcp -- CMD...` starts the reference MCP server
//! (`targets/mcp-ledger`, over stdio), reads its `tools/list` and writes a
//! target file; `chaos probe` then goes tool by tool through a first call,
//! an identical retry and a re-plan. The naive server (a new downstream key
//! per `tools/call`) must fail the retry and the re-plan with a second
//! effect, which proves both faults acted; the correct one must pass all;
//! and a server that cannot be started is a clear message, exit 3, with
//! nothing written.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

/// The reference MCP server's binary, built as the chaos under test was
/// (the target files' `{profile}` placeholder names the same folder).
fn mcp_ledger() -> String {
    let chaos = PathBuf::from(env!("CARGO_BIN_EXE_chaos"));
    let profile_dir = chaos.parent().expect("the binary is in a folder");
    let cargo_profile = match profile_dir.file_name().and_then(|name| name.to_str()) {
        Some("debug") => "dev".to_owned(),
        Some(other) => other.to_owned(),
        None => "dev".to_owned(),
    };
    let built = std::process::Command::new(env!("CARGO"))
        // As the target files build it: the workspace's features unified,
        // so nothing is compiled twice.
        .args(["build", "--quiet", "--workspace", "--bins", "--profile"])
        .arg(&cargo_profile)
        .current_dir(common::repo_root())
        .status()
        .expect("cargo runs");
    assert!(built.success(), "the reference MCP server builds");
    profile_dir.join("mcp-ledger").display().to_string()
}

fn init(dir: &Path, variant: &str) -> Output {
    let ledger = mcp_ledger();
    common::chaos(&[
        "init-target",
        dir.to_str().unwrap(),
        "--mcp",
        "--",
        &ledger,
        "--variant",
        variant,
        "--stdio",
    ])
}

fn probe(dir: &Path) -> (Option<i32>, String, String) {
    let target = dir.join("target.toml");
    let output = common::chaos(&["probe", "--target", target.to_str().unwrap()]);
    let (stdout, stderr) = common::text(&output);
    (output.status.code(), stdout, stderr)
}

/// The lines of the probe's output under `tool`'s heading, up to the next.
fn section<'a>(stdout: &'a str, tool: &str) -> &'a str {
    let start = stdout
        .find(&format!("\ntool {tool} -> "))
        .unwrap_or_else(|| panic!("no section for {tool}:\n{stdout}"));
    let rest = &stdout[start + 1..];
    let end = rest[1..].find("\ntool ").map_or(rest.len(), |end| end + 1);
    &rest[..end]
}

#[test]
fn init_target_maps_the_servers_tools_and_probe_catches_the_naive_one_per_tool() {
    let dir = common::temp_dir("mcp-first-contact-naive");
    let output = init(&dir, "naive");
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("the server lists 3 tool(s)"), "{stdout}");
    assert!(
        stdout.contains("mapped the suite's charge_card to charge_card"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(dir.join("target.toml")).unwrap();
    assert!(text.contains("transport = \"stdio\""), "{text}");
    assert!(
        text.contains("[mcp.tools.send_reminder]\nname = \"send_reminder\""),
        "{text}"
    );
    // The hints the server declared are in the file, for the user to see.
    assert!(text.contains("idempotentHint: true"), "{text}");

    let (code, stdout, stderr) = probe(&dir);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    for tool in ["charge_card", "send_reminder"] {
        let section = section(&stdout, tool);
        assert!(section.contains("idempotentHint: true"), "{section}");
        assert!(section.contains("ok   a first call"), "{section}");
        // Each fault acted: a second effect behind the retry and the re-plan.
        assert!(section.contains("FAIL an identical retry"), "{section}");
        assert!(section.contains("FAIL a re-plan"), "{section}");
        assert!(section.matches("2 new effect(s)").count() >= 2, "{section}");
        assert!(section.contains("annotation-contradicted"), "{section}");
        assert!(
            section.contains("hint: the model decided the step again"),
            "{section}"
        );
    }
    // A tool every call of which is its own effect is left to the run.
    assert!(
        stdout.contains("tool send_notification_to_self: not probed"),
        "{stdout}"
    );
}

#[test]
fn the_correct_server_passes_every_step_of_every_tool() {
    let dir = common::temp_dir("mcp-first-contact-correct");
    let output = init(&dir, "correct");
    assert_eq!(output.status.code(), Some(0), "{:?}", common::text(&output));
    let (code, stdout, stderr) = probe(&dir);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    for tool in ["charge_card", "send_reminder"] {
        let section = section(&stdout, tool);
        assert_eq!(section.matches("\nok   ").count(), 3, "{section}");
        // The retry and the re-plan reached the server and made no effect.
        assert!(section.contains("1 new effect(s)"), "{section}");
    }
}

#[test]
fn a_server_that_cannot_start_is_exit_3_and_nothing_is_written() {
    let dir = common::temp_dir("mcp-first-contact-dead");
    let output = common::chaos(&[
        "init-target",
        dir.to_str().unwrap(),
        "--mcp",
        "--",
        "sh",
        "-c",
        "echo the server refuses to start >&2; exit 7",
    ]);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("could not list the MCP server's tools"),
        "{stderr}"
    );
    assert!(stderr.contains("the server refuses to start"), "{stderr}");
    assert!(!dir.join("target.toml").exists());
}

#[test]
fn a_command_without_mcp_or_mcp_without_a_command_is_bad_usage() {
    let dir = common::temp_dir("mcp-first-contact-usage");
    let output = common::chaos(&["init-target", dir.to_str().unwrap(), "--mcp"]);
    let (_, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("after --"), "{stderr}");
    let output = common::chaos(&["init-target", dir.to_str().unwrap(), "--", "node", "x.js"]);
    let (_, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("add --mcp"), "{stderr}");
    assert!(!dir.join("target.toml").exists());
}
