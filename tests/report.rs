//! `ah report` through the real binary, looked at in a real browser: two
//! attempts of a task (one failing its check), the page written, then
//! loaded in headless Chromium, whose DOM after the page's script ran is
//! checked (one row a run, the totals, the classed diff lines, the hostile
//! task text escaped, the sort script allowed to run), and a screenshot
//! kept as a PNG. Skipped, saying so, where Chromium is not installed
//! (`scripts/setup` installs it). A batch's report is checked as a file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::host::{Host, run_id};
use crate::support::mock::{MockServer, Turn};
use serde_json::json;

const TASK: &str = "<script>alert(1)</script> change a & 'b'";

/// Passes unless a.txt says "bad".
const CHECK: &str = "! grep -q bad a.txt";

/// One attempt's work: write `content` to a.txt, then say it is done.
fn writes(n: usize, content: &str) -> [Turn; 2] {
    crate::support::steps::write_then_say(
        n,
        "a.txt",
        &format!("{content}\n"),
        &format!("attempt {n} done"),
    )
}

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Chromium, headless, on `page` with `args`; its stdout.
fn browse(chromium: &Path, profile: &Path, page: &Path, args: &[String]) -> String {
    let out = Command::new(chromium)
        .env("HOME", profile)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn report_shows_the_runs_in_a_browser_with_everything_escaped() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(
        writes(1, "bad")
            .into_iter()
            .chain(writes(2, "good"))
            .collect(),
    );
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "never",
            "-N",
            "2",
            "-j",
            "1",
        ])
        .args(["--check", CHECK, TASK])
        .output()
        .unwrap();
    assert!(out.status.code().is_some(), "{out:?}");
    let runs = host.runs();
    assert_eq!(runs.len(), 2, "{}", String::from_utf8_lossy(&out.stderr));

    let page = host.root.path().join("out.html");
    let out = host
        .ah(&mock.url())
        .arg("report")
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("://"), "the page names no address");

    let Some(chromium) = chromium() else {
        eprintln!("skipped: no chromium on PATH to load the report in (scripts/setup installs it)");
        return;
    };
    let profile = host.root.path().join("browser");
    let started = Instant::now();
    let dom = browse(&chromium, &profile, &page, &["--dump-dom".to_string()]);
    let shot = host.root.path().join("report.png");
    browse(
        &chromium,
        &profile,
        &page,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1200,1600".to_string(),
        ],
    );
    let took = started.elapsed();
    eprintln!("chromium took {took:?} for the DOM and the screenshot");
    assert!(took < Duration::from_secs(20), "chromium took {took:?}");

    // One row a run, each linking to its section, and the totals.
    assert_eq!(dom.matches("<tr class=\"run\"").count(), 2, "{dom}");
    for run in &runs {
        let id = run_id(run);
        assert!(
            dom.contains(&format!("<tr class=\"run\" id=\"row-{id}\">")),
            "{dom}"
        );
        assert!(dom.contains(&format!("<section class=\"run\" id=\"run-{id}\">")));
    }
    assert!(dom.contains("<td>2 runs</td>"), "{dom}");
    // Two turns of 120 + 30 tokens each, per run.
    let total = &dom[dom.find("<tfoot>").unwrap()..];
    assert!(total.contains("data-sort=\"600\">600</td>"), "{total}");
    assert!(total.contains(">+2 \u{2212}2</td>"), "{total}");
    assert!(dom.contains("<td class=\"passed\">passed</td>"));
    assert!(dom.contains("<td class=\"failed\">failed (1)</td>"));
    assert_eq!(dom.matches("<svg class=\"timeline\"").count(), 2);

    // The diff lines, classed.
    assert!(dom.contains("<span class=\"add\">+good</span>"), "{dom}");
    assert!(dom.contains("<span class=\"add\">+bad</span>"));
    assert_eq!(dom.matches("<span class=\"del\">-one</span>").count(), 2);
    assert!(dom.contains("<span class=\"hunk\">@@ -1 +1 @@</span>"));
    assert!(dom.contains("<span class=\"file\">+++ b/a.txt</span>"));

    // The task is text, not an element; the page's own script is the only
    // one, and it ran (the page's policy allowed it by its hash).
    assert!(!dom.contains("<script>alert(1)</script>"));
    assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt; change a &amp; 'b'"));
    assert_eq!(dom.matches("<script").count(), 1);
    assert!(
        dom.contains("<th title=\"Click to sort\">run</th>"),
        "{dom}"
    );

    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "a PNG at {}",
        shot.display()
    );
}

#[test]
fn report_of_a_batch_has_a_row_a_task_and_the_runs_it_names() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(writes(1, "two").into_iter().collect());
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "change a"])
        .output()
        .unwrap();
    assert!(out.status.code().is_some(), "{out:?}");
    let id = run_id(&host.run());
    let results = host.root.path().join("tasks.results.jsonl");
    let line = |task: &str, runs: &[&str]| {
        json!({"id": task, "runs": runs, "status": "not_applied", "files": 1, "added": 1,
               "removed": 1, "tokens": {"input_tokens": 240, "output_tokens": 60},
               "duration_ms": 1500, "applied": false})
        .to_string()
    };
    let other = "01HZY8J5Q8W3V4N1T2C6B7D9EF";
    std::fs::write(
        &results,
        format!("{}\n{}\n", line("<t1>", &[&id]), line("t2", &[other])),
    )
    .unwrap();
    let page = host.root.path().join("batch.html");
    let out = host
        .ah(&mock.url())
        .arg("report")
        .arg("--batch")
        .arg(&results)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("<tr class=\"task\">").count(), 2, "{html}");
    assert!(html.contains("<td>&lt;t1&gt;</td>"), "{html}");
    assert!(html.contains(&format!("<a href=\"#run-{id}\">{id}</a>")));
    assert!(html.contains(">1.5 s</td>"));
    // Only the run that is in this project has a section.
    assert_eq!(html.matches("<section class=\"run\"").count(), 1);
    assert!(html.contains("<span class=\"add\">+two</span>"));
}
