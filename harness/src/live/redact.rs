//! Secrets in what chaos quotes (issue 27): a target that logs its config
//! leaked its database password through the stderr tail quoted into every
//! report, and a failing `[authority]` command was quoted with the bearer
//! token filled in. Every value chaos knows to be secret for a trial (each
//! `[env]` value the target file writes, each caller's token) is masked in
//! every message a live trial hands on, unless `--include-payloads`; the
//! messages themselves stay, so the reason a trial failed is still there.

use crate::history::{AttemptEnd, RunOutput};
use crate::plan::Trial;
use crate::sweep::Payloads;
use crate::target_file::TargetFile;

/// What a secret becomes.
pub(crate) const MASK: &str = "***";

/// Literal `[env]` text shorter than this is not masked: `1`, `true` or
/// `debug` are settings, not secrets, and masking them would mask every such
/// word of a message.
pub(crate) const MIN_SECRET_BYTES: usize = 6;

/// The secrets of one trial; empty (masking nothing) with `--include-payloads`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Secrets {
    /// Longest first, so a secret holding another is masked whole.
    values: Vec<String>,
}

impl Secrets {
    /// The target file's `[env]` values and `[effects]` database URL (which
    /// may hold a password), and the trial's tokens.
    pub(crate) fn of(target: &TargetFile, trial: &Trial<'_>, payloads: Payloads) -> Secrets {
        if payloads == Payloads::Included {
            return Secrets::default();
        }
        let env = target.env.values().flat_map(|value| value.literal_text());
        let database = target
            .effects
            .iter()
            .map(|effects| effects.database.as_str());
        let tokens = trial.tokens.iter().map(|(_, token)| token.as_str());
        Secrets::new(env.chain(database).chain(tokens).map(str::to_owned))
    }

    pub(crate) fn new(values: impl IntoIterator<Item = String>) -> Secrets {
        let mut values: Vec<String> = values
            .into_iter()
            .filter(|value| value.len() >= MIN_SECRET_BYTES)
            .collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Secrets { values }
    }

    /// `text` with every secret replaced by [`MASK`].
    pub(crate) fn mask(&self, text: &str) -> String {
        self.values
            .iter()
            .fold(text.to_owned(), |text, secret| text.replace(secret, MASK))
    }

    /// Masks the free text of a trial's output: why it could not complete,
    /// and what the target's answers said in words.
    pub(crate) fn mask_output(&self, output: &mut RunOutput) {
        if self.values.is_empty() {
            return;
        }
        if let Some(error) = &mut output.error {
            *error = self.mask(error);
        }
        for attempt in &mut output.history.attempts {
            let answer = match &mut attempt.end {
                AttemptEnd::Answered(answer)
                | AttemptEnd::Lost {
                    dropped: answer, ..
                }
                | AttemptEnd::Truncated { dropped: answer } => answer,
                AttemptEnd::Failed { .. } | AttemptEnd::Abandoned | AttemptEnd::Interrupted => {
                    continue
                }
            };
            for text in [&mut answer.reason, &mut answer.unread]
                .into_iter()
                .flatten()
            {
                *text = self.mask(text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_longest_first_and_short_settings_are_left() {
        let secrets = Secrets::new([
            "hunter2-pw".to_owned(),
            "postgresql://app:hunter2-pw@db/x".to_owned(),
            "1".to_owned(),
        ]);
        assert_eq!(
            secrets
                .mask("connect postgresql://app:hunter2-pw@db/x failed; pw hunter2-pw; retries 1"),
            "connect *** failed; pw ***; retries 1"
        );
        assert_eq!(Secrets::default().mask("hunter2-pw"), "hunter2-pw");
    }
}
