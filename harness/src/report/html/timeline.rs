//! The layout of one failing seed's timeline: four swimlanes (agent, target,
//! provider, authority) on a simulated-time axis, with the agent's attempts as
//! bars, the target's answers, the provider's dispatches and effects, the
//! authority's answers, and the faults on the lane that felt them. Layout only:
//! coordinates and classes, which the template draws as SVG.

use serde::Serialize;

use crate::fault::{Declared, LoseResponse};
use crate::history::{AttemptEnd, Ms};
use crate::report::record::{
    target_answer, AttemptRecord, Consequence, FaultRecord, Role, SeedFailure,
};

/// The kind whose loss on the agent's hop the timeline draws where it happened.
const LOSE_RESPONSE: &str = <LoseResponse as Declared>::NAME;

const WIDTH: f64 = 960.0;
const LEFT: f64 = 92.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 8.0;
const ROW: f64 = 22.0;
const LANE_PAD: f64 = 10.0;
const AXIS: f64 = 30.0;
/// Roughly the width of one character of the 10 px labels.
const CHAR: f64 = 6.0;

#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub axis_y: f64,
    pub lanes: Vec<Lane>,
    pub ticks: Vec<Tick>,
    pub spans: Vec<Span>,
    pub marks: Vec<Mark>,
    pub jumps: Vec<Jump>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Lane {
    pub name: &'static str,
    pub y: f64,
    pub height: f64,
    pub label_y: f64,
    /// Alternate shading.
    pub shaded: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Tick {
    pub x: f64,
    pub label: String,
}

/// Something that lasts: an attempt in flight, the target down.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    pub kind: &'static str,
    pub lane: &'static str,
    pub class: String,
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    pub label: Option<String>,
    pub label_x: f64,
    pub label_y: f64,
    pub title: String,
}

/// Something that happens at an instant.
#[derive(Debug, Clone, Serialize)]
pub struct Mark {
    pub kind: &'static str,
    pub lane: &'static str,
    /// `diamond`, `circle`, `tick` or `bolt`: how the template draws it.
    pub shape: &'static str,
    pub class: String,
    pub x: f64,
    pub y: f64,
    pub label: Option<String>,
    /// Where the label starts, or ends when `label_end` (near the right edge).
    pub label_x: f64,
    pub label_end: bool,
    pub title: String,
}

/// A wall-clock jump: a line across every lane.
#[derive(Debug, Clone, Serialize)]
pub struct Jump {
    pub x: f64,
    pub y1: f64,
    pub y2: f64,
    pub label: String,
    pub title: String,
}

pub fn layout(failure: &SeedFailure) -> Timeline {
    let attempts: Vec<&AttemptRecord> = failure
        .operations
        .iter()
        .flat_map(|operation| &operation.history.attempts)
        .collect();
    let dispatches: Vec<_> = failure
        .operations
        .iter()
        .flat_map(|operation| &operation.ledger.dispatches)
        .chain(&failure.unattributed.dispatches)
        .collect();

    let mut end: Ms = failure.ended_at;
    end = end.max(attempts.iter().map(|a| a.ended_at).max().unwrap_or(0));
    end = end.max(dispatches.iter().map(|d| d.at).max().unwrap_or(0));
    end = end.max(failure.faults.iter().map(|f| f.at).max().unwrap_or(0));
    end = end.max(
        failure
            .authorizations
            .iter()
            .map(|a| a.at)
            .max()
            .unwrap_or(0),
    );
    let effects = failure
        .operations
        .iter()
        .flat_map(|operation| &operation.ledger.effects)
        .chain(&failure.unattributed.effects);
    end = end.max(effects.map(|effect| effect.at).max().unwrap_or(0));
    end = end.max(1);
    let plot = WIDTH - LEFT - RIGHT;
    let x = |at: Ms| LEFT + plot * (at as f64) / (end as f64);

    // The agent lane has a row per worker: concurrent attempts sit apart.
    let rows = attempts.iter().map(|a| a.worker).max().unwrap_or(1).max(1);
    let mut lanes = Vec::new();
    let mut y = TOP;
    for (index, (name, height)) in [
        ("agent", rows as f64 * ROW + LANE_PAD * 2.0),
        ("target", ROW + LANE_PAD * 2.0),
        ("provider", ROW * 2.0 + LANE_PAD * 2.0),
        ("authority", ROW + LANE_PAD * 2.0),
    ]
    .into_iter()
    .enumerate()
    {
        lanes.push(Lane {
            name,
            y,
            height,
            label_y: y + height / 2.0 + 4.0,
            shaded: index % 2 == 0,
        });
        y += height;
    }
    let lane = |name: &str| {
        lanes
            .iter()
            .find(|lane| lane.name == name)
            .expect("every lane is laid out above")
            .clone()
    };
    let (agent, target, provider, authority) = (
        lane("agent"),
        lane("target"),
        lane("provider"),
        lane("authority"),
    );
    let middle = |lane: &Lane| lane.y + lane.height / 2.0;

    let mut spans = Vec::new();
    let mut marks = Vec::new();

    for attempt in &attempts {
        let x0 = x(attempt.sent_at);
        let w = (x(attempt.ended_at) - x0).max(3.0);
        let row_y = agent.y + LANE_PAD + (attempt.worker.max(1) - 1) as f64 * ROW;
        // Numbered as in the findings: call.worker.attempt, and the
        // decision when the step was decided again (`d2`: its second tool call).
        let short = if attempt.decision > 1 {
            format!(
                "{}.{}.{} d{}",
                attempt.call, attempt.worker, attempt.attempt, attempt.decision
            )
        } else {
            format!("{}.{}.{}", attempt.call, attempt.worker, attempt.attempt)
        };
        let long = format!("{short} {}", attempt.saw);
        let label = if (long.len() as f64) * CHAR + 6.0 <= w {
            Some(long)
        } else if (short.len() as f64) * CHAR + 4.0 <= w {
            Some(short)
        } else {
            None
        };
        spans.push(Span {
            kind: "attempt",
            lane: "agent",
            class: format!("attempt {}", end_class(&attempt.end)),
            x: x0,
            y: row_y + 2.0,
            w,
            h: ROW - 4.0,
            label,
            label_x: x0 + 3.0,
            label_y: row_y + ROW / 2.0 + 4.0,
            title: attempt_title(attempt),
        });
        if let Some(answer) = target_answer(&attempt.end) {
            let dropped = matches!(attempt.end, AttemptEnd::Lost { .. });
            // A lost answer left the target when the nemesis caught it (the
            // agent only gave up later): draw it there when that is recorded.
            let answered_at = if dropped {
                failure
                    .faults
                    .iter()
                    .find(|fault| {
                        fault.role == Role::Agent
                            && fault.kind.as_deref() == Some(LOSE_RESPONSE)
                            && attempt.sent_at <= fault.at
                            && fault.at <= attempt.ended_at
                    })
                    .map_or(attempt.ended_at, |fault| fault.at)
            } else {
                attempt.ended_at
            };
            marks.push(Mark {
                kind: "answer",
                lane: "target",
                shape: "circle",
                class: format!(
                    "answer outcome-{}{}",
                    answer.outcome,
                    if dropped { " dropped" } else { "" }
                ),
                x: x(answered_at),
                y: middle(&target),
                label: None,
                label_x: 0.0,
                label_end: false,
                title: format!(
                    "{answered_at} ms: the target answered {} ({}{}) to {}{}",
                    answer.outcome,
                    answer.status,
                    answer
                        .receipt
                        .as_ref()
                        .map(|receipt| format!(", receipt {receipt}"))
                        .unwrap_or_default(),
                    attempt.attempt_id,
                    if dropped {
                        format!(
                            "; the answer was lost on its way to the agent, which gave up at {} ms",
                            attempt.ended_at
                        )
                    } else {
                        String::new()
                    }
                ),
            });
        }
    }

    let dispatch_y = provider.y + LANE_PAD + ROW / 2.0;
    for dispatch in &dispatches {
        let (class, what) = (
            dispatch.disposition.class(),
            dispatch.disposition.describe(),
        );
        marks.push(Mark {
            kind: "dispatch",
            lane: "provider",
            shape: "diamond",
            class: format!("dispatch {class}"),
            x: x(dispatch.at),
            y: dispatch_y,
            label: Some(format!("#{}", dispatch.number)),
            label_x: 0.0,
            label_end: false,
            title: format!(
                "{} ms: dispatch {} reached the provider (key {}); {what}",
                dispatch.at,
                dispatch.number,
                dispatch.key.as_deref().unwrap_or("none"),
            ),
        });
    }

    let effect_y = provider.y + LANE_PAD + ROW * 1.5;
    for operation in &failure.operations {
        let allowed = operation.summary.expected_effects_max as usize;
        for (index, effect) in operation.ledger.effects.iter().enumerate() {
            let extra = index >= allowed;
            marks.push(Mark {
                kind: "effect",
                lane: "provider",
                shape: "circle",
                class: if extra {
                    "effect extra".into()
                } else {
                    "effect".into()
                },
                x: x(effect.at),
                y: effect_y,
                label: Some(effect.receipt.clone()),
                label_x: 0.0,
                label_end: false,
                title: format!(
                    "{} ms: effect {} of operation '{}' ({}, dispatch {}){}",
                    effect.at,
                    index + 1,
                    operation.summary.name,
                    effect.receipt,
                    effect.dispatch,
                    if extra {
                        format!("; more than the {allowed} allowed")
                    } else {
                        String::new()
                    }
                ),
            });
        }
    }
    for effect in &failure.unattributed.effects {
        marks.push(Mark {
            kind: "effect",
            lane: "provider",
            shape: "circle",
            class: "effect extra".into(),
            x: x(effect.at),
            y: effect_y,
            label: Some(effect.receipt.clone()),
            label_x: 0.0,
            label_end: false,
            title: format!(
                "{} ms: effect {} (dispatch {}) that no operation of the run accounts for",
                effect.at, effect.receipt, effect.dispatch
            ),
        });
    }

    for decision in &failure.authorizations {
        marks.push(Mark {
            kind: "authorization",
            lane: "authority",
            shape: "tick",
            class: if decision.allows_tool {
                "authorization allowed".into()
            } else {
                "authorization refused".into()
            },
            x: x(decision.at),
            y: middle(&authority),
            label: None,
            label_x: 0.0,
            label_end: false,
            title: format!(
                "{} ms: the authority answered active={} scope=\"{}\"{}",
                decision.at,
                decision.active,
                decision.scope,
                if decision.during_attempts.is_empty() {
                    String::new()
                } else {
                    format!(" during {}", decision.during_attempts.join(", "))
                }
            ),
        });
    }

    let top = lanes.first().map_or(TOP, |lane| lane.y);
    let bottom = lanes.last().map_or(TOP, |lane| lane.y + lane.height);
    let mut jumps = Vec::new();
    let mut down_since: Option<Ms> = None;
    for fault in &failure.faults {
        let lane = match fault.role {
            Role::Agent => &agent,
            Role::Target => &target,
            Role::Provider => &provider,
            Role::Authority => &authority,
            Role::Clock => {
                jumps.push(Jump {
                    x: x(fault.at),
                    y1: top,
                    y2: bottom,
                    label: fault.description.clone(),
                    title: fault_title(fault),
                });
                continue;
            }
        };
        // A kill and the restart after it shade the time the target was down.
        match fault.consequence {
            Some(Consequence::TargetKilled) => down_since = Some(fault.at),
            Some(Consequence::TargetRestarted) => {
                if let Some(since) = down_since.take() {
                    spans.push(down_span(x(since), x(fault.at), &target, since, fault.at));
                }
            }
            None => {}
        }
        marks.push(Mark {
            kind: "fault",
            lane: lane.name,
            shape: "bolt",
            class: "fault".into(),
            x: x(fault.at),
            y: lane.y + LANE_PAD - 2.0,
            label: None,
            label_x: 0.0,
            label_end: false,
            title: fault_title(fault),
        });
    }
    if let Some(since) = down_since {
        spans.push(down_span(x(since), x(end), &target, since, end));
    }

    declutter(&mut marks);
    let axis_y = bottom + 4.0;
    let step = tick_step(end);
    let ticks = (0..=end / step)
        .map(|index| {
            let at = index * step;
            Tick {
                x: x(at),
                label: format!("{at} ms"),
            }
        })
        .collect();

    Timeline {
        width: WIDTH,
        height: axis_y + AXIS,
        left: LEFT,
        right: WIDTH - RIGHT,
        axis_y,
        lanes,
        ticks,
        spans,
        marks,
        jumps,
    }
}

/// Marks of one kind that land on the same spot (four dispatches released
/// together) are fanned out a few pixels apart, and share one label, so the
/// count stays visible; the tooltips keep the exact times.
fn declutter(marks: &mut [Mark]) {
    const NEAR: f64 = 12.0;
    const FAN: f64 = 9.0;
    // Labels sit right of their mark (of their cluster's last mark), or end
    // left of the cluster when they would run past the right edge.
    let mut left: Vec<f64> = marks.iter().map(|mark| mark.x).collect();
    let mut order: Vec<usize> = (0..marks.len()).collect();
    order.sort_by(|&a, &b| {
        (marks[a].lane, marks[a].kind)
            .cmp(&(marks[b].lane, marks[b].kind))
            .then(marks[a].y.total_cmp(&marks[b].y))
            .then(marks[a].x.total_cmp(&marks[b].x))
    });
    let mut start = 0;
    while start < order.len() {
        let anchor = &marks[order[start]];
        let (lane, kind, y, x) = (anchor.lane, anchor.kind, anchor.y, anchor.x);
        let mut end = start + 1;
        while end < order.len() {
            let next = &marks[order[end]];
            if next.lane != lane || next.kind != kind || next.y != y || next.x - x >= NEAR {
                break;
            }
            end += 1;
        }
        let cluster = &order[start..end];
        if cluster.len() > 1 {
            let labels: Vec<String> = cluster
                .iter()
                .filter_map(|&index| marks[index].label.clone())
                .collect();
            let joined = labels.join(",");
            let label = if joined.len() <= 28 || labels.len() < 2 {
                joined
            } else {
                format!(
                    "{}…{} ({})",
                    labels[0],
                    labels[labels.len() - 1],
                    labels.len()
                )
            };
            for (position, &index) in cluster.iter().enumerate() {
                marks[index].x = x + position as f64 * FAN;
                left[index] = x;
                let last = position + 1 == cluster.len();
                marks[index].label = (last && !label.is_empty()).then(|| label.clone());
            }
        }
        start = end;
    }
    for (mark, left) in marks.iter_mut().zip(left) {
        let width = mark.label.as_ref().map_or(0, |label| label.chars().count()) as f64 * CHAR;
        mark.label_x = mark.x + 8.0;
        if mark.label_x + width > WIDTH - 2.0 {
            mark.label_x = left - 8.0;
            mark.label_end = true;
        }
    }
}

fn down_span(x0: f64, x1: f64, target: &Lane, since: Ms, until: Ms) -> Span {
    Span {
        kind: "down",
        lane: "target",
        class: "down".into(),
        x: x0,
        y: target.y + 3.0,
        w: (x1 - x0).max(2.0),
        h: target.height - 6.0,
        label: Some("down".into()),
        label_x: x0 + 3.0,
        label_y: target.y + 14.0,
        title: format!("the target was down from {since} ms to {until} ms"),
    }
}

/// The class an attempt's bar is coloured by: what the agent learned.
fn end_class(end: &AttemptEnd) -> String {
    match end {
        AttemptEnd::Answered(answer) => format!("outcome-{}", answer.outcome),
        AttemptEnd::Lost { .. } => "lost".into(),
        AttemptEnd::Failed { .. } => "failed".into(),
        AttemptEnd::Abandoned | AttemptEnd::Interrupted => "abandoned".into(),
        AttemptEnd::Truncated { .. } => "lost".into(),
    }
}

fn attempt_title(attempt: &AttemptRecord) -> String {
    let what = match &attempt.end {
        AttemptEnd::Answered(answer) => format!(
            "answered {} ({}{})",
            answer.outcome,
            answer.status,
            answer
                .receipt
                .as_ref()
                .map(|receipt| format!(", receipt {receipt}"))
                .unwrap_or_default()
        ),
        AttemptEnd::Lost { mode, dropped } => format!(
            "the target answered {} but the answer was lost ({mode})",
            dropped.outcome
        ),
        AttemptEnd::Failed { failure } => format!("no answer: {failure}"),
        AttemptEnd::Abandoned => "abandoned: the agent crashed while it waited".into(),
        AttemptEnd::Truncated { dropped } => format!(
            "the target answered {} but the answer reached the agent truncated, unreadable",
            dropped.outcome
        ),
        AttemptEnd::Interrupted => {
            "dropped: the user said \"try again\" while the agent waited".into()
        }
    };
    format!(
        "{} (call {}, worker {}, attempt {}, tool call {} (decision {}), key {}, {} payload): sent at {} ms, ended at {} ms; {what}",
        attempt.attempt_id,
        attempt.call,
        attempt.worker,
        attempt.attempt,
        attempt.tool_use_id,
        attempt.decision,
        attempt.key,
        attempt.payload_variant.as_str(),
        attempt.sent_at,
        attempt.ended_at
    )
}

fn fault_title(fault: &FaultRecord) -> String {
    format!(
        "{} ms: {}{}",
        fault.at,
        fault.description,
        fault
            .kind
            .as_ref()
            .map(|kind| format!(" ({kind})"))
            .unwrap_or_default()
    )
}

/// A round step (1, 2, 5, 10, 20, 50, ... ms) giving at most ten ticks.
fn tick_step(end: Ms) -> Ms {
    let mut base: Ms = 1;
    loop {
        for multiple in [1, 2, 5] {
            let step = base.saturating_mul(multiple);
            if end / step <= 10 {
                return step;
            }
        }
        base = base.saturating_mul(10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_few() {
        assert_eq!(tick_step(8), 1);
        assert_eq!(tick_step(34), 5);
        assert_eq!(tick_step(120), 20);
        assert_eq!(tick_step(1_000), 100);
    }
}
