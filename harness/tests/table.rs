//! Snapshot of the terminal matrix for a fixed run.

mod common;

use chaos::report::table;
use chaos::Seeds;

#[test]
fn the_matrix_reads_at_a_glance() {
    let scenarios = vec![
        common::scenario("lost-response-keyed"),
        common::scenario("changed-payload"),
        common::scenario("revoked-permission"),
    ];
    let targets = chaos::reference_targets();
    let summary = common::sweep(&scenarios, &targets, Seeds::Range { first: 0, count: 3 });
    insta::assert_snapshot!("matrix", table::render(&summary, false));
    insta::assert_snapshot!(
        "failures",
        table::render_failures(&summary).replace(env!("CARGO_MANIFEST_DIR"), "<harness>")
    );
}
