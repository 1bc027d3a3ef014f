//! Shrinking a failing case to a minimal one: proptest's own shrinking (the
//! value tree's `simplify`/`complicate`), then a greedy post-pass over
//! [`Case::simpler`] until no single simpler move still fails.
//!
//! "Still fails" means fails *the same way*: the same decisive check. Without
//! that, shrinking a changed-payload failure could slide into an unrelated
//! duplicate and hand back a schedule that shows a different bug.

use std::sync::atomic::{AtomicBool, Ordering};

use proptest::strategy::ValueTree;

use super::schedule::Case;
use crate::check::Verdict;

/// Shrinking stops after this many candidate runs, however far it got.
pub const MAX_SHRINK_STEPS: u64 = 5_000;

/// The smallest failing case found, and what it took.
#[derive(Debug, Clone)]
pub struct Shrunk {
    pub case: Case,
    pub verdict: Verdict,
    /// Candidates run while shrinking.
    pub steps: u64,
    /// Candidates that still failed and were kept.
    pub accepted: u64,
    /// Cut short (Ctrl-C or [`MAX_SHRINK_STEPS`]): smaller than found, maybe not minimal.
    pub complete: bool,
}

/// Shrinks the failing `tree.current()`, whose verdict is `verdict`. `judge`
/// runs one case; `on_step` hears of every candidate run.
pub fn shrink<T: ValueTree<Value = Case>>(
    tree: &mut T,
    verdict: Verdict,
    judge: &dyn Fn(&Case) -> Verdict,
    on_step: &dyn Fn(&Shrunk),
    cancel: &AtomicBool,
) -> Shrunk {
    let check = verdict.failed_check();
    let fails_the_same_way = |verdict: &Verdict| check.is_some() && verdict.failed_check() == check;
    let mut best = Shrunk {
        case: tree.current(),
        verdict,
        steps: 0,
        accepted: 0,
        complete: false,
    };
    let out_of_steps =
        |best: &Shrunk| best.steps >= MAX_SHRINK_STEPS || cancel.load(Ordering::Relaxed);

    // Runs one candidate and keeps it if it fails the same way; says whether it did.
    let try_candidate = |best: &mut Shrunk, candidate: Case| -> bool {
        let verdict = judge(&candidate);
        best.steps += 1;
        let kept = fails_the_same_way(&verdict);
        if kept {
            best.case = candidate;
            best.verdict = verdict;
            best.accepted += 1;
        }
        on_step(best);
        kept
    };

    // proptest's shrinking: simplify while it still fails, complicate when it
    // passes, until the tree can move no further.
    if tree.simplify() {
        while !out_of_steps(&best) {
            let moved = if try_candidate(&mut best, tree.current()) {
                tree.simplify()
            } else {
                tree.complicate()
            };
            if !moved {
                break;
            }
        }
    }

    // The post-pass: proptest shrinks one part at a time, so a fault that
    // could only go once a call had shrunk is still there. Take any simpler
    // neighbour that still fails, until none does.
    'pass: loop {
        for candidate in best.case.simpler() {
            if out_of_steps(&best) {
                return best;
            }
            if try_candidate(&mut best, candidate) {
                continue 'pass;
            }
        }
        best.complete = true;
        return best;
    }
}
