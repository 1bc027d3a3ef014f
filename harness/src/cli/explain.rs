//! `chaos explain CHECK`: a check's page (what it means, an example
//! history, how to fix the layer), as `rustc --explain` prints an error's.

use super::stdout::{out, outln};
use crate::check::explain::all_pages;
use crate::check::Check;
use crate::error::Error;
use crate::exit::Exit;

#[derive(Debug, clap::Args)]
pub(super) struct ExplainArgs {
    /// The check, as a report names it (`duplicate-effect`). None: every
    /// check with what it fails on.
    #[arg(conflicts_with = "all")]
    check: Option<String>,
    /// Every page, as one Markdown document (the book's chapter).
    #[arg(long)]
    all: bool,
}

pub(super) fn explain(args: ExplainArgs) -> Result<Exit, Error> {
    if args.all {
        out!("{}", all_pages());
        return Ok(Exit::Success);
    }
    let Some(name) = args.check else {
        outln!("checks (chaos explain CHECK prints one's page):");
        for (check, name) in Check::ALL {
            outln!("  {name:<30} {}", check.fails_when());
        }
        return Ok(Exit::Success);
    };
    // A finding is printed as `check: message`; the name pasted with its
    // colon, or in another case, still finds its page.
    let wanted = name.trim().trim_end_matches(':').to_ascii_lowercase();
    match Check::parse(&wanted) {
        Some(check) => {
            out!("{}", check.page());
            Ok(Exit::Success)
        }
        None => {
            let names: Vec<&str> = Check::ALL.iter().map(|(_, name)| *name).collect();
            let near: Vec<&str> = names
                .iter()
                .copied()
                .filter(|known| {
                    let words = |text: &str| text.split('-').map(str::to_owned).collect::<Vec<_>>();
                    words(known)
                        .iter()
                        .any(|word| words(&wanted).contains(word))
                })
                .collect();
            let hint = if near.is_empty() {
                String::new()
            } else {
                format!(" Did you mean {}?", near.join(" or "))
            };
            Err(Error::Usage(format!(
                "no check is named '{name}'.{hint} Choose from: {}",
                names.join(", ")
            )))
        }
    }
}
