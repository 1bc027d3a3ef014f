//! Sharding for CI matrices: `--partition K/N` splits the (scenario, target,
//! seed) trials, and `chaos merge` of the N shard reports equals the report of
//! the unsharded run, byte for byte. Guards issue #4, item 5.

mod common;

use chaos::report::{merge, Summary};
use chaos::{Partition, Seeds, Sweep};

fn run(seeds: Seeds, partition: Option<Partition>, failures_kept: usize) -> Summary {
    common::run_sweep(
        &common::all_scenarios(),
        &chaos::reference_targets(),
        Sweep {
            partition,
            failures_kept,
            ..Sweep::new(seeds)
        },
    )
}

#[test]
fn merged_shards_equal_the_unsharded_run() {
    // Twelve seeds, more than the five failures a cell keeps, so which
    // failures survive the merge matters; the second sweep wraps past u64::MAX.
    for (seeds, kept, totals) in [
        (
            Seeds::Range {
                first: 3,
                count: 12,
            },
            5,
            &[2, 3, 7][..],
        ),
        (
            Seeds::Range {
                first: u64::MAX - 3,
                count: 7,
            },
            2,
            &[1, 3][..],
        ),
    ] {
        let whole = run(seeds, None, kept);
        for &total in totals {
            let shards: Vec<Summary> = (1..=total)
                .map(|index| run(seeds, Some(Partition { index, total }), kept))
                .collect();
            let trials: u64 = shards
                .iter()
                .flat_map(|shard| &shard.cells)
                .map(|cell| cell.seeds_run)
                .sum();
            assert_eq!(
                trials,
                whole.cells.iter().map(|cell| cell.seeds_run).sum::<u64>(),
                "{total} shards must cover every trial exactly once"
            );
            // Shards merge in any order.
            let mut reversed = shards;
            reversed.reverse();
            let merged = merge::merge(reversed).expect("the shards merge");
            assert_eq!(merged, whole, "{total} shards of {seeds}");
        }
    }
}

#[test]
fn a_shard_reports_only_its_own_cells() {
    // 1 scenario x 3 targets x 2 seeds = 6 trials; shard 6/6 holds only the last.
    let shard = common::run_sweep(
        &[common::scenario("changed-payload")],
        &chaos::reference_targets(),
        Sweep {
            partition: Some(Partition { index: 6, total: 6 }),
            ..Sweep::new(Seeds::Range { first: 0, count: 2 })
        },
    );
    assert_eq!(shard.cells.len(), 1);
    assert_eq!(shard.cells[0].target, "ledger");
    assert_eq!(shard.cells[0].seeds_run, 1);
}

#[test]
fn chaos_merge_writes_the_unsharded_reports() {
    let dir = common::temp_dir("merge");
    let out = |name: &str| dir.join(name).display().to_string();
    let sweep = [
        "run",
        "scenarios/lost-response-keyed.toml",
        "scenarios/changed-payload.toml",
        "scenarios/revoked-permission.toml",
        "--seeds",
        "8",
        "--first-seed",
        "20",
    ];
    let whole = common::chaos(&[&sweep[..], &["--out", &out("whole")]].concat());
    assert_eq!(whole.status.code(), Some(1));
    for index in 1..=3 {
        let partition = format!("{index}/3");
        let shard = common::chaos(
            &[
                &sweep[..],
                &[
                    "--partition",
                    &partition,
                    "--out",
                    &out(&format!("shard{index}")),
                ],
            ]
            .concat(),
        );
        let stdout = String::from_utf8_lossy(&shard.stdout);
        assert!(stdout.contains(&format!("; shard {index}/3")), "{stdout}");
        let report: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.join(format!("shard{index}/report.json"))).unwrap(),
        )
        .unwrap();
        common::assert_valid_report(&report);
    }
    let junit = dir.join("merged-junit.xml");
    let merged = common::chaos(&[
        "merge",
        &out("shard2/report.json"),
        &out("shard3/report.json"),
        &out("shard1/report.json"),
        "--out",
        &out("merged"),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&merged.stdout);
    assert_eq!(
        merged.status.code(),
        Some(1),
        "the merged run failed: {stdout}"
    );
    assert!(stdout.starts_with("chaos: merged 3 shard(s)"), "{stdout}");
    for file in ["report.json", "junit.xml", "summary.md", "report.html"] {
        assert_eq!(
            std::fs::read_to_string(dir.join("merged").join(file)).unwrap(),
            std::fs::read_to_string(dir.join("whole").join(file)).unwrap(),
            "merged {file} differs from the unsharded run's"
        );
    }
    assert!(junit.is_file());
}

#[test]
fn chaos_merge_refuses_an_incomplete_or_mixed_set() {
    let dir = common::temp_dir("merge-errors");
    let out = |name: &str| dir.join(name).display().to_string();
    let base = ["run", "scenarios/changed-payload.toml", "--seeds", "4"];
    for (name, extra) in [
        ("a1", vec!["--partition", "1/2"]),
        ("a2", vec!["--partition", "2/2"]),
        ("b2", vec!["--partition", "2/2", "--first-seed", "100"]),
        ("whole", vec![]),
    ] {
        let output = common::chaos(&[&base[..], &extra, &["--out", &out(name)]].concat());
        assert_eq!(output.status.code(), Some(1), "{name}");
    }
    let report = |name: &str| out(&format!("{name}/report.json"));
    let cases = [
        (vec![report("a1")], "shard(s) 2/2 missing"),
        (vec![report("a1"), report("a1")], "shard 1/2 is given twice"),
        (
            vec![report("a1"), report("b2")],
            "report 2 differs from report 1 in its seeds",
        ),
        (vec![report("whole")], "report 1 is not a shard"),
        (
            vec![report("a1"), out("nowhere/report.json")],
            "failed to read the report",
        ),
    ];
    for (reports, expected) in cases {
        let mut args = vec!["merge".to_owned()];
        args.extend(reports);
        args.extend(["--out".to_owned(), out("never")]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = common::chaos(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(expected),
            "expected '{expected}' in: {stderr}"
        );
        assert!(
            !dir.join("never").exists(),
            "nothing is written on bad input"
        );
    }
}

/// Issue 27: a shard is a file anyone can edit. A deleted cell, a count
/// past the seeds run or a `seeds_run` of 10^12 is refused, naming the
/// shard and the cell, never summed in.
#[test]
fn chaos_merge_refuses_a_tampered_shard_naming_it_and_the_cell() {
    let dir = common::temp_dir("merge-tampered");
    let out = |name: &str| dir.join(name).display().to_string();
    for shard in ["1/2", "2/2"] {
        let name = format!("s{}", &shard[..1]);
        let output = common::chaos(&[
            "run",
            "scenarios/lost-response-keyed.toml",
            "scenarios/changed-payload.toml",
            "--target",
            "ledger",
            "--target",
            "fresh-key",
            "--seeds",
            "4",
            "--partition",
            shard,
            "--out",
            &out(&name),
        ]);
        assert_eq!(output.status.code(), Some(1), "{shard}");
    }
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out("s2/report.json")).unwrap()).unwrap();
    let tamper = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut report = original.clone();
        edit(&mut report);
        std::fs::create_dir_all(out(name)).unwrap();
        std::fs::write(out(&format!("{name}/report.json")), report.to_string()).unwrap();
        out(&format!("{name}/report.json"))
    };
    let cases = [
        (
            tamper("deleted", &|report| {
                report["cells"].as_array_mut().unwrap().remove(1);
            }),
            "does not add up at lost-response-keyed x fresh-key: the cell is missing",
        ),
        (
            tamper("failed", &|report| {
                report["cells"][0]["seeds_failed"] = 3.into();
            }),
            "seeds failed and undecided 3 exceeds the 2 seeds run",
        ),
        (
            tamper("inflated", &|report| {
                report["cells"][0]["seeds_run"] = 1_000_000_000_000u64.into();
            }),
            "1000000000000 trial(s), and 2 of it are this shard's",
        ),
    ];
    for (tampered, expected) in cases {
        let output = common::chaos(&[
            "merge",
            &out("s1/report.json"),
            &tampered,
            "--out",
            &out("never"),
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("report 2 (shard 2/2)"), "{stderr}");
        assert!(
            stderr.contains(expected),
            "expected '{expected}' in: {stderr}"
        );
        assert!(!dir.join("never").exists(), "nothing is written");
    }
    // The untouched pair still merges.
    let output = common::chaos(&[
        "merge",
        &out("s1/report.json"),
        &out("s2/report.json"),
        "--out",
        &out("merged"),
    ]);
    assert_eq!(output.status.code(), Some(1));
}
