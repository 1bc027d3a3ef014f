//! Time, live. The simulator moves every clock forward for free; a real
//! target reads the machine's clock, which nobody may move. So a scenario's
//! `advance-clock` is carried out live the way the issue asks: the provider's
//! retention and the target's declared retention are set short for the run
//! (seconds, in the same order as declared), and the harness really waits
//! them out, bounded.
//!
//! A jump becomes the wait that crosses exactly the retentions the jump
//! crosses, and no other. When that cannot be done (a retention the target
//! cannot shorten and that is too long to wait), the trial is not run: its
//! verdict is an honest `unknown` naming why, never a silent pass.
//!
//! An approval's `expires-after` is a milestone like a retention: the
//! authority records it shortened for the run, on the same side of every
//! retention as declared, and a jump past it waits it out. So is a broker's
//! duplicate window (JetStream's `duplicate_window`, inside which the broker
//! drops a message whose `Nats-Msg-Id` it saw): chaos sets it on the run's
//! stream, shortened the same way, before the trial's first call.

use std::collections::BTreeMap;
use std::time::Duration;

use chaos_kit::protocol::ProviderProfile;

use crate::fault::Live;
use crate::roles::nemesis::ClockWait;
use crate::scenario::Scenario;
use crate::target_file::Retention;

/// The shortened retentions, in the order of the declared ones.
const SHORT: Duration = Duration::from_secs(1);
const LONGER: Duration = Duration::from_secs(3);
/// How far past a retention a wait goes, so that both sides of the run (the
/// target's clock, the checker's) agree it has passed.
const MARGIN: Duration = Duration::from_millis(250);
/// The longest the harness waits for one trial's clock jumps.
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(60);

/// What a live trial does about time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LiveTime {
    /// The provider's retention for this run (its config and
    /// `CHAOS_PROVIDER_RETENTION_MS`).
    pub(crate) provider_retention: Option<Duration>,
    /// The target's retention for this run (`CHAOS_RETENTION_MS`, and what the
    /// checker judges "past retention" by).
    pub(crate) target_retention: Option<Duration>,
    /// The scenario's clock jumps, by fault index, as waits.
    pub(crate) clock_waits: BTreeMap<usize, ClockWait>,
    /// How long each fixture approval holds for this run, in the fixture's
    /// order: the declared `expires-after`, or the shortened one of a jump.
    pub(crate) approval_expiries: Vec<Option<Duration>>,
    /// The broker's duplicate window for this trial, when the way in keeps
    /// one chaos sets: the declared one, or the shortened one of a jump.
    pub(crate) duplicate_window: Option<Duration>,
}

/// Decides the retentions and waits of a live run of `scenario` against a
/// target declaring `retention`, whose way in keeps a duplicate window of
/// `window` (a broker's); `Err` says why the scenario cannot be run live.
pub(crate) fn live_time(
    scenario: &Scenario,
    retention: Option<Retention>,
    window: Option<Duration>,
) -> Result<LiveTime, String> {
    refuse_long_waits(scenario)?;
    let jumps: Vec<(usize, Duration)> = scenario
        .faults
        .iter()
        .enumerate()
        .filter_map(|(index, fault)| match fault.live() {
            Live::ClockJump(by) => Some((index, by)),
            Live::AsSimulated | Live::Restarts => None,
        })
        .collect();
    let provider_declared = match scenario.provider.profile {
        ProviderProfile::Blind => None,
        ProviderProfile::Keyed | ProviderProfile::Lookup => scenario.provider.retention,
    };
    let target_declared = retention.map(|retention| retention.period);
    let approvals_declared: Vec<Option<Duration>> = scenario
        .fixture
        .iter()
        .flat_map(|fixture| &fixture.approvals)
        .map(|approval| approval.expires_after)
        .collect();
    if jumps.is_empty() {
        // Nothing expires during the run: the declared retentions stand.
        return Ok(LiveTime {
            provider_retention: scenario.provider.retention,
            target_retention: target_declared,
            clock_waits: BTreeMap::new(),
            approval_expiries: approvals_declared,
            duplicate_window: window,
        });
    }

    let (provider_live, target_live) = live_periods(provider_declared, retention);

    // (declared, live, what it is) for each retention a jump may cross.
    let mut milestones: Vec<(Duration, Duration, String)> = [
        provider_declared
            .zip(provider_live)
            .map(|(d, l)| (d, l, "the provider's retention".to_owned())),
        target_declared
            .zip(target_live)
            .map(|(d, l)| (d, l, "the target's declared retention".to_owned())),
    ]
    .into_iter()
    .flatten()
    .collect();
    let approval_expiries = shorten_approvals(&approvals_declared, &milestones)?;
    // Placed among the retentions as an approval is: chaos sets it, so it
    // can always be shortened. Pushed after the approvals were placed, as
    // they were placed among the retentions only.
    let duplicate_window = shorten_approvals(&[window], &milestones)?.pop().flatten();
    for (number, (declared, live)) in approvals_declared
        .iter()
        .zip(&approval_expiries)
        .enumerate()
    {
        if let (Some(declared), Some(live)) = (declared, live) {
            milestones.push((
                *declared,
                *live,
                format!("approval {}'s expiry", number + 1),
            ));
        }
    }

    if let (Some(declared), Some(live)) = (window, duplicate_window) {
        milestones.push((declared, live, "the broker's duplicate window".to_owned()));
    }

    let clock_waits = waits(&jumps, &milestones, target_declared)?;
    Ok(LiveTime {
        provider_retention: provider_live.or(scenario.provider.retention),
        target_retention: target_live.or(target_declared),
        clock_waits,
        approval_expiries,
        duplicate_window,
    })
}

/// A real wait past the limit used to hold a live run for ever, whatever
/// signal came (issue 15): it is refused before the target starts.
fn refuse_long_waits(scenario: &Scenario) -> Result<(), String> {
    for (index, fault) in scenario.faults.iter().enumerate() {
        if let Some((key, wait)) = fault.real_wait() {
            if wait > WAIT_LIMIT {
                return Err(format!(
                    "fault {} ({}) has {key} = \"{}\", which live is a real wait, past the live limit of {}; \
                     shorten it, or run this scenario in the simulator",
                    index + 1,
                    fault.kind(),
                    humantime::format_duration(wait),
                    humantime::format_duration(WAIT_LIMIT),
                ));
            }
        }
    }
    Ok(())
}

/// The provider's and the target's retentions for a run that jumps the
/// clock: short, in the order declared, unless the target cannot shorten
/// its own; then the provider's is placed on the same side of it.
fn live_periods(
    provider_declared: Option<Duration>,
    retention: Option<Retention>,
) -> (Option<Duration>, Option<Duration>) {
    match (provider_declared, retention) {
        (None, None) => (None, None),
        (Some(_), None) => (Some(SHORT), None),
        (None, Some(target)) => (
            None,
            Some(if target.shorten { SHORT } else { target.period }),
        ),
        (Some(provider), Some(target)) if target.shorten => {
            let (provider_live, target_live) = match provider.cmp(&target.period) {
                std::cmp::Ordering::Less => (SHORT, LONGER),
                std::cmp::Ordering::Greater => (LONGER, SHORT),
                std::cmp::Ordering::Equal => (SHORT, SHORT),
            };
            (Some(provider_live), Some(target_live))
        }
        // The target keeps its own period; the provider's is placed on the
        // same side of it as declared.
        (Some(provider), Some(target)) => {
            let fixed = target.period;
            let provider_live = match provider.cmp(&fixed) {
                std::cmp::Ordering::Less => SHORT.min(fixed / 3),
                std::cmp::Ordering::Greater => fixed + LONGER,
                std::cmp::Ordering::Equal => fixed,
            };
            (Some(provider_live), Some(fixed))
        }
    }
}

/// Each jump as the wait that crosses exactly the milestones it crosses
/// (declared, live, what), by fault index; `Err` when no wait can.
fn waits(
    jumps: &[(usize, Duration)],
    milestones: &[(Duration, Duration, String)],
    target_declared: Option<Duration>,
) -> Result<BTreeMap<usize, ClockWait>, String> {
    let mut clock_waits = BTreeMap::new();
    let mut jumped = Duration::ZERO;
    let mut waited = Duration::ZERO;
    for &(index, by) in jumps {
        jumped += by;
        let crossed: Vec<&(Duration, Duration, String)> = milestones
            .iter()
            .filter(|(declared, _, _)| *declared <= jumped)
            .collect();
        let until = crossed
            .iter()
            .map(|(_, live, _)| *live + MARGIN)
            .max()
            .unwrap_or(Duration::ZERO);
        if until > WAIT_LIMIT {
            return Err(format!(
                "advance-clock by {} crosses {} of {}, which the target cannot shorten for the run \
                 (its target file says retention.shorten = false), and waiting {} is past the live limit of {}. \
                 Let the target read CHAOS_RETENTION_MS and set shorten = true, or run this scenario in the simulator",
                humantime::format_duration(by),
                crossed.iter().map(|(_, _, what)| what.as_str()).collect::<Vec<_>>().join(" and "),
                humantime::format_duration(target_declared.unwrap_or_default()),
                humantime::format_duration(until),
                humantime::format_duration(WAIT_LIMIT),
            ));
        }
        if let Some((_, live, what)) = milestones
            .iter()
            .find(|(declared, live, _)| *declared > jumped && *live <= until)
        {
            return Err(format!(
                "advance-clock by {} must stay inside {what}, but the wait it needs ({}) would pass it ({} for the run)",
                humantime::format_duration(by),
                humantime::format_duration(until),
                humantime::format_duration(*live)
            ));
        }
        let wait = until.saturating_sub(waited);
        waited = waited.max(until);
        let note = if crossed.is_empty() {
            "live: no retention is crossed, so nothing is waited".to_owned()
        } else {
            format!(
                "live: waited {}, past {}",
                humantime::format_duration(wait),
                crossed
                    .iter()
                    .map(|(_, live, what)| format!(
                        "{what} ({} for this run)",
                        humantime::format_duration(*live)
                    ))
                    .collect::<Vec<_>>()
                    .join(" and ")
            )
        };
        clock_waits.insert(index, ClockWait { wait, note });
    }
    Ok(clock_waits)
}

/// Each approval's expiry for the run, placed between the shortened
/// retentions exactly as its declared expiry lies between the declared ones,
/// so a jump crosses the same milestones live as in the simulator. Nobody
/// else reads an approval's expiry, so it can always be shortened; the only
/// impossible case is one equal to a retention that is not.
fn shorten_approvals(
    declared: &[Option<Duration>],
    retentions: &[(Duration, Duration, String)],
) -> Result<Vec<Option<Duration>>, String> {
    declared
        .iter()
        .map(|expiry| {
            let Some(expiry) = *expiry else {
                return Ok(None);
            };
            if let Some((_, live, _)) = retentions.iter().find(|(d, _, _)| *d == expiry) {
                return Ok(Some(*live));
            }
            let below = retentions
                .iter()
                .filter(|(d, _, _)| *d < expiry)
                .map(|(_, live, _)| *live)
                .max()
                .unwrap_or(Duration::ZERO);
            let above = retentions
                .iter()
                .filter(|(d, _, _)| *d > expiry)
                .map(|(_, live, _)| *live)
                .min();
            let live = match above {
                Some(above) if above <= below => {
                    return Err(format!(
                        "an approval's expires-after = \"{}\" lies between retentions that are {} apart for the run; \
                         run this scenario in the simulator",
                        humantime::format_duration(expiry),
                        humantime::format_duration(above.saturating_sub(below)),
                    ))
                }
                // Halfway, so a wait past it (with its margin) stays short of the next.
                Some(above) => below + (above - below) / 2,
                None => below + SHORT,
            };
            Ok(Some(live))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chaos_kit::target::AfterRetention;

    fn scenario(jump: &str) -> Scenario {
        let text = format!(
            "test = \"expired-history\"\ndescription = \"d\"\n[provider]\nprofile = \"keyed\"\nretention = \"24h\"\n\
             [[call]]\noperation = \"a\"\n[[call]]\noperation = \"a\"\n\
             [[fault]]\nkind = \"advance-clock\"\nby = \"{jump}\"\nafter-call = 1\n"
        );
        Scenario::parse(std::path::Path::new("s.toml"), &text).unwrap()
    }

    fn declared(period: &str, shorten: bool) -> Option<Retention> {
        Some(Retention {
            period: humantime::parse_duration(period).unwrap(),
            after: AfterRetention::NewOperation,
            shorten,
        })
    }

    // guards: `restart-after = "999999999days"` held a live run for ever (issue 15)
    #[test]
    fn a_real_wait_past_the_limit_is_refused() {
        let mut scenario = scenario("1s");
        let file: crate::fault::FaultFile = toml::from_str(
            "kind = \"crash-target\"\nat = \"after-commit\"\nnth = 1\nrestart-after = \"999999999days\"",
        )
        .unwrap();
        scenario.faults = vec![file.validate(2).unwrap()];
        let why = live_time(&scenario, None, None).unwrap_err();
        assert!(why.contains("restart-after"), "{why}");
        assert!(why.contains("past the live limit of 1m"), "{why}");
    }

    #[test]
    fn a_jump_past_the_provider_only_waits_out_the_provider_only() {
        let time = live_time(&scenario("25h"), declared("7days", true), None).unwrap();
        assert_eq!(time.provider_retention, Some(SHORT));
        assert_eq!(time.target_retention, Some(LONGER));
        let wait = &time.clock_waits[&0];
        assert_eq!(wait.wait, SHORT + MARGIN);
        assert!(wait.wait < LONGER);
        assert!(
            wait.note
                .contains("the provider's retention (1s for this run)"),
            "{}",
            wait.note
        );
    }

    #[test]
    fn a_jump_past_both_waits_out_both() {
        let time = live_time(&scenario("400days"), declared("7days", true), None).unwrap();
        assert_eq!(time.clock_waits[&0].wait, LONGER + MARGIN);
    }

    #[test]
    fn a_target_that_remembers_forever_is_never_waited_for() {
        let time = live_time(&scenario("400days"), None, None).unwrap();
        assert_eq!(time.target_retention, None);
        assert_eq!(time.clock_waits[&0].wait, SHORT + MARGIN);
    }

    #[test]
    fn a_retention_that_cannot_be_shortened_is_waited_out_or_refused() {
        // 2 seconds, fixed: waiting it out is fine. The provider's 24h stays
        // on its side of it: longer.
        let time = live_time(&scenario("400days"), declared("2s", false), None).unwrap();
        assert_eq!(time.target_retention, Some(Duration::from_secs(2)));
        assert_eq!(
            time.provider_retention,
            Some(Duration::from_secs(2) + LONGER)
        );
        assert_eq!(
            time.clock_waits[&0].wait,
            Duration::from_secs(2) + LONGER + MARGIN
        );
        // 7 days, fixed: the run cannot honestly be done live.
        let why = live_time(&scenario("400days"), declared("7days", false), None).unwrap_err();
        assert!(why.contains("cannot shorten"), "{why}");
        assert!(why.contains("CHAOS_RETENTION_MS"), "{why}");
        // ...unless the jump does not reach it.
        let time = live_time(&scenario("25h"), declared("7days", false), None).unwrap();
        assert_eq!(time.clock_waits[&0].wait, SHORT + MARGIN);
    }

    fn with_approval(expires_after: &str, jump: &str) -> Scenario {
        let text = format!(
            "test = \"authorization\"\ndescription = \"d\"\n[provider]\nprofile = \"keyed\"\nretention = \"24h\"\n\
             [fixture]\nactor = \"alex\"\ntenant = \"north\"\nscope = [\"send_reminder\"]\n\
             [fixture.records]\nINV-A = \"north\"\n\
             [[fixture.approval]]\nactor = \"alex\"\ntool = \"send_reminder\"\ninvoice = \"INV-A\"\n\
             recipient = \"r\"\nbody = \"b\"\nexpires-after = \"{expires_after}\"\n\
             [[call]]\noperation = \"a\"\ntool = \"send_reminder\"\nattempts = 1\ndecision = \"deny\"\n\
             [call.arguments]\ninvoice = \"INV-A\"\nrecipient = \"r\"\nbody = \"b\"\n\
             [[call]]\noperation = \"b\"\ntool = \"send_reminder\"\nattempts = 1\ndecision = \"deny\"\n\
             [call.arguments]\ninvoice = \"INV-A\"\nrecipient = \"r\"\nbody = \"b\"\n\
             [[fault]]\nkind = \"advance-clock\"\nby = \"{jump}\"\nafter-call = 1\n"
        );
        Scenario::parse(std::path::Path::new("s.toml"), &text).unwrap()
    }

    // guards: approval-expired could not run live; the jump crossed no
    // retention, was waited out as nothing, and the approval never expired.
    #[test]
    fn a_jump_past_an_approval_waits_out_its_shortened_expiry_only() {
        let time = live_time(&with_approval("1h", "2h"), None, None).unwrap();
        // Below the provider's 24h, shortened to 1s: halfway to it.
        let expiry = time.approval_expiries[0].unwrap();
        assert_eq!(expiry, SHORT / 2);
        assert_eq!(time.provider_retention, Some(SHORT));
        let wait = &time.clock_waits[&0];
        assert_eq!(wait.wait, expiry + MARGIN);
        assert!(wait.wait < SHORT, "the provider's retention is not crossed");
        assert!(wait.note.contains("approval 1's expiry"), "{}", wait.note);
        // A jump that stays inside the approval waits nothing.
        let time = live_time(&with_approval("3h", "2h"), None, None).unwrap();
        assert_eq!(time.clock_waits[&0].wait, Duration::ZERO);
        // Without a jump, the approval holds as declared.
        let mut plain = with_approval("1h", "2h");
        plain.faults.clear();
        let time = live_time(&plain, None, None).unwrap();
        assert_eq!(time.approval_expiries, [Some(Duration::from_secs(3600))]);
    }

    #[test]
    fn an_approval_past_every_retention_expires_after_them() {
        let time = live_time(
            &with_approval("30days", "40days"),
            declared("7days", true),
            None,
        )
        .unwrap();
        assert_eq!(time.approval_expiries[0], Some(LONGER + SHORT));
        assert_eq!(time.clock_waits[&0].wait, LONGER + SHORT + MARGIN);
    }

    // guards: issue 25, a producer's second publish past the broker's
    // duplicate window: the window is shortened for the run as a retention
    // is, and a jump past it (inside the provider's retention) waits out the
    // window only; one that stays inside it waits nothing
    #[test]
    fn a_jump_past_the_duplicate_window_waits_out_the_shortened_window_only() {
        let two_minutes = Some(Duration::from_secs(120));
        let time = live_time(&scenario("5m"), None, two_minutes).unwrap();
        // Below the provider's 24h, shortened to 1s: halfway to it.
        let window = time.duplicate_window.unwrap();
        assert_eq!(window, SHORT / 2);
        let wait = &time.clock_waits[&0];
        assert_eq!(wait.wait, window + MARGIN);
        assert!(wait.wait < SHORT, "the provider's retention is not crossed");
        assert!(
            wait.note
                .contains("the broker's duplicate window (500ms for this run)"),
            "{}",
            wait.note
        );
        let time = live_time(&scenario("1m"), None, two_minutes).unwrap();
        assert_eq!(time.clock_waits[&0].wait, Duration::ZERO);
        // Without a jump, the declared window stands.
        let mut plain = scenario("1m");
        plain.faults.clear();
        let time = live_time(&plain, None, two_minutes).unwrap();
        assert_eq!(time.duplicate_window, two_minutes);
    }

    #[test]
    fn without_a_jump_the_declared_retentions_stand() {
        let mut plain = scenario("1h");
        plain.faults.clear();
        let time = live_time(&plain, declared("7days", true), None).unwrap();
        assert_eq!(time.provider_retention, Some(Duration::from_secs(86_400)));
        assert_eq!(time.target_retention, Some(Duration::from_secs(7 * 86_400)));
        assert!(time.clock_waits.is_empty());
    }
}
