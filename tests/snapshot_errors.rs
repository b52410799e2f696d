//! Snapshots of the error messages people meet most, through the real
//! binary, with their exit codes: an unknown option, a model without its
//! name or one the API does not know, `--json` with `--review ask`, a
//! missing or malformed `--image`, a bad configuration file (with its
//! line), a bad policy glob, `ah apply` with no runs, of an unknown run or
//! of a prefix several runs share, `--steer` with no ah running, an unknown
//! `/command`, an empty issue for `ah work`. Each says what is wrong and
//! what to do; these pin that text (`tests/snapshots/`) so that a rework
//! cannot lose the second half unseen.

use crate::support::host::{Host, describe};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::required;
use crate::support::snap;

/// Runs `ah ARGS` on `host` against `url` and shows it as a snapshot reads
/// it: the command line, then [`snap::output`].
fn case(host: &Host, url: &str, args: &[&str]) -> String {
    let out = host.ah(url).args(args).output().unwrap();
    format!("$ ah {}\n{}", args.join(" "), snap::output(&out))
}

/// Mistakes found before any model is asked: no model server is needed.
#[test]
fn mistakes_in_what_was_asked() {
    let host = Host::git(&[("a.txt", "one\n")]);
    // Nothing listens here: none of these gets as far as the model.
    let url = "http://127.0.0.1:9";
    let issue = host.root.path().join("empty-issue.md");
    std::fs::write(&issue, "\n  \n").unwrap();
    let work = ["work", "--backend", "none", issue.to_str().unwrap()];
    let cases: Vec<&[&str]> = vec![
        // First, before anything made `.ah/`.
        &["apply", "01jzz"],
        &["--frobnicate", "task"],
        &["-m", "openai:", "--backend", "none", "task"],
        &["--json", "--review", "ask", "--backend", "none", "task"],
        &["--backend", "none", "/nosuch"],
        &work,
    ];
    let mut text: Vec<String> = cases.iter().map(|args| case(&host, url, args)).collect();

    host.write(".ah/config.toml", "[model]\nname = \"x\"\nno value here\n");
    text.push(case(&host, url, &["--backend", "none", "task"]));
    std::fs::remove_file(host.project.join(".ah/config.toml")).unwrap();

    host.write(".ah/policy.toml", "[write]\ndeny = [\"src/**\", \"a[b\"]\n");
    text.push(case(&host, url, &["--backend", "none", "task"]));
    std::fs::remove_file(host.project.join(".ah/policy.toml")).unwrap();
    text.push(case(
        &host,
        url,
        &["--backend", "none", "--deny", "x[", "task"],
    ));

    // Two runs whose ids share a prefix (ids fixed here: only the names of
    // the run folders are read to match one).
    for id in ["01JABCDEFGHJKMNPQRSTVWXYZ0", "01JABCDEFGHJKMNPQRSTVWXYZ1"] {
        std::fs::create_dir_all(host.project.join(".ah/runs").join(id)).unwrap();
    }
    text.push(case(&host, url, &["apply", "01jzz"]));
    text.push(case(&host, url, &["apply", "01jabc"]));

    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(text.join("\n"));
}

/// Mistakes that need a session or a model's answer first.
#[test]
fn mistakes_found_by_a_run() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text("done")),
        Turn::error(404, "not_found_error", "model: claude-nosuch"),
    ]);
    let url = mock.url();
    let run = ["--backend", "none", "--review", "never"];
    let out = host.ah(&url).args(run).arg("task").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let text = [
        case(&host, &url, &["--steer", "it's late"]),
        case(
            &host,
            &url,
            &[&run[..], &["-m", "claude-nosuch", "--new", "task"]].concat(),
        ),
    ];
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(text.join("\n"));
}

/// `--image` naming an image podman does not have, or no image at all.
#[test]
fn a_missing_or_malformed_image() {
    if ah_sandbox::podman::find_podman().is_err() {
        assert!(
            !required(),
            "AH_REQUIRE_PODMAN is set but podman is missing"
        );
        eprintln!("skipped: podman is not installed");
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let url = "http://127.0.0.1:9";
    let text = [
        case(
            &host,
            url,
            &["--image", "localhost/ah-missing:never", "task"],
        ),
        case(&host, url, &["--image", "bad!image", "task"]),
    ];
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(text.join("\n"));
}
