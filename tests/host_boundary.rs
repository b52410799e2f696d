//! Attacks on ah's host-side handling of the work tree, through the real
//! binary on both backends: an undo made to write through a link the model
//! planted in an ignored folder (into the project's `.ah/`, where the next
//! run would read a planted config, and into the run's own records), rules
//! files that are FIFOs or huge, and steps whose changes git cannot record
//! (which must be undone, never left unchecked).

use crate::support::host::{Host, describe};
use crate::support::mock::MockServer;
use crate::support::podman::podman_ready_blocking;
use crate::support::steps::{bash, script};

/// The backends to attack: `none` always, `podman` where it runs.
fn backends() -> Vec<&'static str> {
    let mut all = vec!["none"];
    if podman_ready_blocking().is_some() {
        all.push("podman");
    }
    all
}

fn run(host: &Host, mock: &MockServer, backend: &str) -> std::process::Output {
    host.ah(&mock.url())
        .args(["--backend", backend, "--review", "never", "attack"])
        .output()
        .expect("run ah")
}

#[test]
fn an_undo_never_writes_through_a_link_in_an_ignored_folder() {
    for backend in backends() {
        let host = Host::git(&[("README.md", "hi\n")]);
        let mock = MockServer::start(script(vec![
            // Accepted: folders holding what the model wants on the host.
            bash(
                "mkdir -p d r/steps && printf 'backend = \"none\"\\nreview = \"auto\"\\n' \
                 > d/config.toml && echo forged > r/steps/step-1.out",
            ),
            // Ignored, swapped for links to the project's .ah/ and to the run
            // directory, and a denied write so that the step is undone.
            bash(
                "printf 'd\\nr\\n' > .gitignore && rm -rf d r && ln -s ../../.. d && \
                 ln -s .. r && echo SECRET=1 > .env",
            ),
            bash("ls -la; cat d/config.toml"),
        ]));
        let out = run(&host, &mock, backend);
        assert!(out.status.code().is_some(), "{backend}: {}", describe(&out));
        let requests = mock.requests();
        assert!(
            requests[2].told().contains("step undone"),
            "{backend}: {}",
            requests[2].told()
        );
        assert!(
            !host.project.join(".ah/config.toml").exists(),
            "{backend}: the undo planted a config in the project's .ah/"
        );
        let run_dir = host.run();
        let step1 = std::fs::read_to_string(run_dir.join("steps/step-1.out")).unwrap_or_default();
        assert!(
            !step1.contains("forged"),
            "{backend}: step record rewritten"
        );
        // The model sees its accepted files again, in real folders.
        let after = requests[3].told();
        assert!(after.contains("backend = \"none\""), "{backend}: {after}");
    }
}

#[test]
fn a_step_git_cannot_record_is_undone_before_anything_else_runs() {
    for backend in backends() {
        let host = Host::git(&[("README.md", "hi\n")]);
        let mock = MockServer::start(script(vec![
            bash("mkdir '.git ' && echo x > '.git /config' && echo SECRET=1 > .env"),
            bash("ls -a; cat .env"),
        ]));
        let out = run(&host, &mock, backend);
        assert!(out.status.code().is_some(), "{backend}: {}", describe(&out));
        let requests = mock.requests();
        let first = requests[1].told();
        assert!(first.contains("cannot be recorded"), "{backend}: {first}");
        assert!(first.contains("step undone"), "{backend}: {first}");
        let second = requests[2].told();
        assert!(!second.contains("SECRET=1"), "{backend}: {second}");
        assert!(!second.contains(".git "), "{backend}: {second}");
    }
}

#[test]
fn rules_files_that_are_fifos_or_huge_neither_hang_nor_count() {
    for backend in backends() {
        let host = Host::git(&[("README.md", "hi\n")]);
        let mock = MockServer::start(script(vec![
            bash("mkfifo .gitignore && mkdir sub && mkfifo sub/.gitattributes && echo a > a.txt"),
            bash("rm .gitignore && yes '*.log' | head -c 28000000 > .gitignore && echo b > b.log"),
            bash("ls -a"),
        ]));
        let out = run(&host, &mock, backend);
        assert!(out.status.code().is_some(), "{backend}: {}", describe(&out));
        let requests = mock.requests();
        assert_eq!(requests.len(), 4, "{backend}: {}", describe(&out));
        let first = requests[1].told();
        assert!(!first.contains("step undone"), "{backend}: {first}");
        let second = requests[2].told();
        assert!(
            second.contains("\".gitignore\" cannot be recorded"),
            "{backend}: {second}"
        );
        assert!(second.contains("step undone"), "{backend}: {second}");
        let listing = requests[3].told();
        assert!(!listing.contains("b.log"), "{backend}: {listing}");
    }
}
