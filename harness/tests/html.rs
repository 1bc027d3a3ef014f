//! report.html: one self-contained page, checked in a real headless browser
//! (Debian's `chromium`): it loads with no console message of any kind, its
//! script runs, and every failing case shows its timeline's four swimlanes
//! with the attempts, dispatches, effects and faults of its record. Guards
//! issue #4, item 3.
//!
//! The browser tests are `#[ignore]`d, so that `cargo nextest run` shows them
//! as skipped where no browser is promised: a runtime skip used to count as a
//! PASS (issue 15). `.ci/run` installs chromium and runs them with
//! `--run-ignored only`; run that way, a missing browser is a failure.
//! `CHAOS_CHROMIUM` names another browser binary.

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chaos::report::{html, Summary};
use chaos::Seeds;

const LANES: [&str; 4] = ["agent", "target", "provider", "authority"];

fn summary() -> Summary {
    let scenarios = vec![
        common::scenario("worker-restart"),
        common::scenario("concurrent-attempts"),
        common::scenario("expired-history"),
        common::scenario("revoked-permission"),
        common::scenario("lost-response-keyed"),
    ];
    common::sweep(
        &scenarios,
        &chaos::reference_targets(),
        Seeds::Range { first: 0, count: 2 },
    )
}

#[test]
fn the_page_is_self_contained_and_escapes_what_it_shows() {
    let mut summary = summary();
    summary.scenarios[0].description = "<script>alert(1)</script> & more".into();
    let page = html::render(&summary);
    assert!(page.starts_with("<!doctype html>"));
    // guards: the header read "seeds seeds 0..=1" (issue 15)
    assert!(page.contains("seeds 0..=1 (2 per cell)"));
    assert!(!page.contains("seeds seeds"), "the seeds label is doubled");
    for external in ["src=\"http", "href=\"http", "url(http", "@import", "<link"] {
        assert!(
            !page.contains(external),
            "the page fetches something: {external}"
        );
    }
    assert!(!page.contains("<script>alert(1)"));
    assert!(page.contains("&lt;script&gt;alert(1)") && page.contains("&amp; more"));
    // A passing run renders too, with no case section.
    let passing = common::sweep(
        &[common::scenario("lost-response-keyed")],
        &[chaos::find("ledger").unwrap()],
        Seeds::One(1),
    );
    let page = html::render(&passing);
    assert!(page.contains("all 1 cells passed") && !page.contains("id=\"cases\""));
}

/// The browser to drive, or why there is none.
fn browser() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CHAOS_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// The browser; a test that was asked to run (`--run-ignored`) without one
/// fails, saying how to get one.
fn browser_or_fail() -> PathBuf {
    browser().unwrap_or_else(|| {
        panic!(
            "chromium not found: install Debian's `chromium` (apt-get install chromium) or set CHAOS_CHROMIUM; \
             without a browser, leave out --run-ignored and this test shows as skipped"
        )
    })
}

struct Loaded {
    /// The DOM after the page's scripts ran.
    dom: String,
    /// Every console message the page produced (errors, warnings, logs).
    console: Vec<String>,
}

/// Loads `page` in a fresh headless profile and returns its DOM and console.
fn load(browser: &Path, page: &Path) -> Loaded {
    let dir = common::temp_dir(&format!(
        "chromium-profile-{}",
        page.file_stem().unwrap().to_string_lossy()
    ));
    let profile = dir.join("profile");
    let stdout = dir.join("dom.html");
    let stderr = dir.join("stderr.txt");
    let mut command = Command::new(browser);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).unwrap())
        .stderr(File::create(&stderr).unwrap());
    // Its own process group, so a hung browser is killed with its helpers.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().expect("the browser starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(180) {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!(
                "the browser did not finish loading {} in 180 s",
                page.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(status.success(), "the browser failed ({status}): {log}");
    let console = log
        .lines()
        .filter(|line| line.contains("CONSOLE") && line.contains("source:"))
        .map(str::to_owned)
        .collect();
    let dom = std::fs::read_to_string(&stdout).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Loaded { dom, console }
}

/// The console check can fail: a page that logs an error and throws is caught.
#[test]
#[ignore = "needs chromium: run with --run-ignored only (.ci/run does)"]
fn the_console_check_catches_a_broken_page() {
    let browser = browser_or_fail();
    let dir = common::temp_dir("html-probe");
    let page = dir.join("broken.html");
    std::fs::write(
        &page,
        "<!doctype html><html><body><script>console.error('probe'); undefinedFunction();</script></body></html>",
    )
    .unwrap();
    let loaded = load(&browser, &page);
    assert!(
        loaded.console.iter().any(|line| line.contains("probe")),
        "{:?}",
        loaded.console
    );
    assert!(
        loaded
            .console
            .iter()
            .any(|line| line.contains("undefinedFunction")),
        "{:?}",
        loaded.console
    );
}

/// Appended to a copy of the report: measures, in the browser, the rendered
/// size of each lane and event of every timeline, so the test sees what a
/// person would, not only the markup.
const MEASURE: &str = r#"<script>
(function () {
  var out = [];
  document.querySelectorAll("article.case").forEach(function (article) {
    var svg = article.querySelector("svg.timeline");
    if (!svg) { out.push(article.id + "|no-timeline"); return; }
    var lanes = Array.prototype.map.call(svg.querySelectorAll("g.lane"), function (lane) {
      var box = lane.getBoundingClientRect();
      return lane.getAttribute("data-lane") + ":" + (box.height > 10 && box.width > 400 ? "shown" : "hidden");
    });
    var counts = {};
    svg.querySelectorAll("g.event").forEach(function (event) {
      var box = event.getBoundingClientRect();
      if (box.width > 0 && box.height > 0) {
        var kind = event.getAttribute("data-kind");
        counts[kind] = (counts[kind] || 0) + 1;
      }
    });
    var kinds = Object.keys(counts).sort().map(function (kind) { return kind + "=" + counts[kind]; });
    out.push(article.id + "|" + lanes.join(",") + "|" + kinds.join(","));
  });
  var pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = out.join("\n");
  document.body.appendChild(pre);
})();
</script>"#;

// guards: without a browser this test reported PASS, the skip invisible in
// nextest's summary (issue 15)
#[test]
#[ignore = "needs chromium: run with --run-ignored only (.ci/run does)"]
fn the_report_loads_without_console_errors_and_shows_the_swimlanes() {
    let browser = browser_or_fail();
    let summary = summary();
    let dir = common::temp_dir("html-report");
    let page = dir.join("report.html");
    let rendered = html::render(&summary);
    std::fs::write(&page, &rendered).unwrap();

    let loaded = load(&browser, &page);
    assert!(
        loaded.console.is_empty(),
        "the report logged to the console:\n{}",
        loaded.console.join("\n")
    );
    assert!(
        loaded.dom.contains("data-ready=\"true\""),
        "the page's script did not run to the end"
    );

    let measured_page = dir.join("measured.html");
    std::fs::write(
        &measured_page,
        rendered.replace("</body>", &format!("{MEASURE}</body>")),
    )
    .unwrap();
    let measured = load(&browser, &measured_page);
    assert!(measured.console.is_empty(), "{:?}", measured.console);
    let tag = "<pre id=\"measured\">";
    let start = measured.dom.find(tag).expect("the measuring script ran") + tag.len();
    let end = start + measured.dom[start..].find("</pre>").unwrap();
    let lines: Vec<&str> = measured.dom[start..end].lines().collect();

    let failing: Vec<_> = summary
        .cells
        .iter()
        .filter(|cell| cell.verdict != chaos::Status::Pass)
        .collect();
    assert_eq!(
        lines.len(),
        failing.len(),
        "a case per failing cell: {lines:?}"
    );
    for cell in failing {
        let anchor = format!("case-{}--{}", cell.scenario, cell.target);
        let line = lines
            .iter()
            .find(|line| line.starts_with(&format!("{anchor}|")))
            .unwrap_or_else(|| panic!("no case {anchor} in {lines:?}"));
        let fields: Vec<&str> = line.split('|').collect();
        let lanes: Vec<String> = LANES.iter().map(|lane| format!("{lane}:shown")).collect();
        assert_eq!(fields[1], lanes.join(","), "{anchor}: {line}");

        // What the first kept seed's record holds is what the timeline shows.
        let failure = &cell.failures[0];
        let count = |kind: &str| {
            fields[2]
                .split(',')
                .find_map(|pair| pair.strip_prefix(&format!("{kind}=")))
                .map_or(0, |count| count.parse::<usize>().unwrap())
        };
        let attempts: usize = failure
            .operations
            .iter()
            .map(|operation| operation.history.attempts.len())
            .sum();
        let dispatches: usize = failure
            .operations
            .iter()
            .map(|operation| operation.ledger.dispatches.len())
            .sum();
        let effects: usize = failure
            .operations
            .iter()
            .map(|operation| operation.ledger.effects.len())
            .sum();
        assert_eq!(count("attempt"), attempts, "{anchor}: {line}");
        assert_eq!(count("dispatch"), dispatches, "{anchor}: {line}");
        assert_eq!(count("effect"), effects, "{anchor}: {line}");
        assert_eq!(
            count("authorization"),
            failure.authorizations.len(),
            "{anchor}: {line}"
        );
        let faults = failure
            .faults
            .iter()
            .filter(|fault| fault.role != chaos::report::record::Role::Clock)
            .count();
        assert_eq!(count("fault"), faults, "{anchor}: {line}");
        let jumps = failure.faults.len() - faults;
        assert_eq!(count("clock-jump"), jumps, "{anchor}: {line}");
    }
    // The cases this sweep must show, with their faults.
    let worker_restart = lines
        .iter()
        .find(|line| line.starts_with("case-worker-restart--fresh-key|"))
        .unwrap();
    assert!(worker_restart.contains("down=1"), "{worker_restart}");
    let expired = lines
        .iter()
        .find(|line| line.starts_with("case-expired-history--fresh-key|"))
        .unwrap();
    assert!(expired.contains("clock-jump=1"), "{expired}");
}
