//! Runs on a remote podman engine (`--engine podman-remote`): the real ah,
//! as the unprivileged test user, sends its sandbox to another user's
//! rootless podman service reached over ssh on 127.0.0.1 (a second machine
//! simulated on this one; `scripts/setup` makes it). Nothing of the host's
//! file system is mounted there: the baseline travels once, changes come
//! back through the agent and are replayed byte for byte, the host's
//! changes (file tools, an undo) go back, and no container is left.
//! Needs root, `AH_TEST_USER` and `AH_TEST_REMOTE_USER` (CI sets them).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::host::{describe, wait_until};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::no_container_left_by;
use crate::support::remote_run::Remote;
use serde_json::json;
fn bash(id: &str, command: &str) -> Turn {
    Turn::reply(Reply::new().tool_use(id, "bash", json!({ "command": command })))
}

#[test]
fn a_remote_sandboxs_edits_come_back_byte_for_byte_and_the_hosts_go_there() {
    let Some(r) = Remote::new(&[
        ("a.txt", "one\n"),
        ("old.txt", "to be renamed\n"),
        ("gone/x.txt", "x\n"),
        ("run.sh", "#!/bin/sh\necho run\n"),
    ]) else {
        return;
    };
    let project = r.project.display().to_string();
    let mock = MockServer::start(vec![
        // Nothing of this host is mounted: the project came as a snapshot.
        bash(
            "t1",
            &format!(
                "cat a.txt; grep -c ' /work ' /proc/self/mountinfo; \
                 grep -q '{project}' /proc/self/mountinfo && echo host-mounted; \
             printf 'two\\0\\377\\n' >> a.txt; mv old.txt new.txt; rm -r gone; \
             chmod +x run.sh; ln -s a.txt link; mkdir -p d/e && echo deep > d/e/f.txt; \
             mkfifo pipe"
            ),
        ),
        // A file tool writes on the host; the sandbox sees it at once.
        Turn::reply(Reply::new().tool_use(
            "t2",
            "write",
            json!({"path": "written.txt", "content": "from the host\n"}),
        )),
        // A folder made by a step is watched; a file changed through a
        // second name is seen under its first, then through the name it
        // has no event for.
        bash(
            "t3",
            "cat written.txt; ls -l run.sh | cut -c1-10; echo more >> d/e/f.txt; \
             ln a.txt hard && echo via-hard >> hard",
        ),
        bash("t4", "echo again >> hard"),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = r.ah(&mock, &["--review", "never", "change things"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let id = r.run_id();
    let applied = r.apply(&id);
    assert_eq!(applied.status.code(), Some(0), "{}", describe(&applied));
    let requests = mock.requests();
    let told = requests[1].told();
    assert!(told.starts_with("one\n1\n"), "{told}");
    assert!(!told.contains("host-mounted"), "{told}");
    let told = requests[3].told();
    assert!(told.contains("from the host"), "{told}");
    assert!(told.contains("-rwxr-xr-x"), "{told}");

    let p = &r.project;
    let a = b"one\ntwo\0\xff\nvia-hard\nagain\n";
    assert_eq!(std::fs::read(p.join("a.txt")).unwrap(), a);
    assert_eq!(std::fs::read(p.join("hard")).unwrap(), a);
    assert!(!p.join("old.txt").exists());
    assert_eq!(
        std::fs::read_to_string(p.join("new.txt")).unwrap(),
        "to be renamed\n"
    );
    assert!(!p.join("gone").exists());
    assert_eq!(
        std::fs::metadata(p.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o111,
        0o111
    );
    assert_eq!(
        std::fs::read_link(p.join("link")).unwrap(),
        Path::new("a.txt")
    );
    assert_eq!(
        std::fs::read_to_string(p.join("d/e/f.txt")).unwrap(),
        "deep\nmore\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("written.txt")).unwrap(),
        "from the host\n"
    );
    assert!(!p.join("pipe").exists(), "a FIFO is never made on the host");
    // The run's new files came back as its artifacts too.
    let artifacts = r.project.join(".ah/runs").join(&id).join("artifacts");
    assert_eq!(
        std::fs::read_to_string(artifacts.join("d/e/f.txt")).unwrap(),
        "deep\nmore\n"
    );

    // Its container is gone from the remote engine.
    no_container_left_by(&id, |id| r.engine.containers_of(id));
}

#[test]
fn a_step_the_policy_refuses_is_undone_in_the_remote_sandbox_too() {
    let Some(r) = Remote::new(&[("src/lib.rs", "fn a() {}\n"), ("secret.txt", "s\n")]) else {
        return;
    };
    let policy = r.project.join(".ah/policy.toml");
    std::fs::create_dir_all(policy.parent().unwrap()).unwrap();
    std::fs::write(&policy, "[write]\ndeny = [\"locked/**\"]\n").unwrap();
    r.user.chown(&r.project.join(".ah"));
    let mock = MockServer::start(vec![
        bash(
            "t1",
            "mkdir locked && echo no > locked/a.txt && echo yes > ok.txt",
        ),
        bash("t2", "ls locked 2>&1; cat ok.txt 2>&1; echo end"),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = r.ah(&mock, &["--review", "never", "try"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert!(
        requests[1].told().contains("undone"),
        "{}",
        requests[1].told()
    );
    let told = requests[2].told();
    assert!(
        told.contains("No such file") && !told.contains("yes\n"),
        "the undo reached the remote sandbox: {told}"
    );
}

#[test]
fn a_remote_sandbox_has_no_network_and_its_memory_limit_holds() {
    let Some(r) = Remote::new(&[("a.txt", "a\n")]) else {
        return;
    };
    let mock = MockServer::start(vec![
        bash(
            "t1",
            "ls /sys/class/net; python3 -c 'b = bytearray(600 * 2**20)' 2>&1 | tail -1; echo after; \
             id -u; cat /proc/self/uid_map",
        ),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = r.ah(&mock, &["--review", "never", "--memory", "256m", "look"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let told = mock.requests()[1].told();
    assert!(told.starts_with("lo\n"), "only the loopback: {told}");
    assert!(
        told.contains("MemoryError") && told.contains("after"),
        "{told}"
    );
    // The sandbox's user is not the remote user: uid 1000 of the user's
    // namespace, where only root is the remote user outside.
    let identity: Vec<Vec<&str>> = told
        .split("after\n")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let own = r.engine.uid.to_string();
    assert_eq!(identity.first(), Some(&vec!["1000"]), "{told}");
    assert_eq!(
        identity.get(1),
        Some(&vec!["0", own.as_str(), "1"]),
        "{told}"
    );
    assert!(
        identity[2..]
            .iter()
            .all(|map| map.get(1) != Some(&own.as_str())),
        "{told}"
    );
    let manifest = r.manifest(&r.run_id());
    let memory = &manifest["limits"][0];
    assert_eq!(memory["by"], "rlimit", "{manifest}");

    // The proxy would run on this machine: refused, never full network.
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("done"))]);
    let out = r.ah(&mock, &["--review", "never", "--network", "proxy", "look"]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not available on a remote engine"),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_second_run_on_the_same_baseline_sends_no_files_and_a_step_sends_its_change() {
    // A baseline no engine has seen yet.
    let unique = format!("{:?}\n", std::time::SystemTime::now());
    let Some(r) = Remote::new(&[("a.txt", "a\n"), ("unique.txt", &unique)]) else {
        return;
    };
    let run = |r: &Remote| {
        let mock = MockServer::start(vec![
            bash("t1", "echo line >> a.txt"),
            Turn::reply(Reply::new().text("done")),
        ]);
        let out = r.ah(&mock, &["--review", "never", "add a line"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        r.manifest(&r.runs().pop().unwrap())["traffic"].clone()
    };
    let first = run(&r);
    let second = run(&r);
    assert!(first["start"].as_u64().unwrap() > 0, "{first}");
    assert_eq!(second["start"], 0, "the engine kept the baseline: {second}");
    assert_eq!(second["steps"], 7, "the step's one changed file: {second}");
}

#[test]
fn an_interrupted_run_leaves_no_container_and_a_killed_ones_is_swept_by_the_next() {
    let Some(r) = Remote::new(&[("a.txt", "a\n")]) else {
        return;
    };
    let start = |mock: &MockServer| {
        r.command(mock, &["--review", "never", "wait"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Until its command runs in the remote container.
    let running = |mock: &MockServer| {
        mock.wait_for_requests(1, Duration::from_secs(120));
        let mut id = String::new();
        wait_until("the remote container", Duration::from_secs(120), || {
            id = r.runs().pop().unwrap_or_default();
            !id.is_empty() && !r.engine.containers_of(&id).is_empty()
        });
        id
    };
    let sleeper = || {
        MockServer::start(vec![
            bash("t1", "sleep 120"),
            Turn::reply(Reply::new().text("done")),
        ])
    };

    let mock = sleeper();
    let ah = start(&mock);
    let id = running(&mock);
    // The baseline its /work is an overlay of cannot be removed meanwhile
    // (by another client pruning the engine's cache).
    // (The run's own container: one filling the engine's cache carries
    // the run's label too.)
    let mut base = String::new();
    wait_until("the run's container", Duration::from_secs(120), || {
        let mut inspect = r.engine.podman();
        inspect
            .args(["inspect", "--format", "{{range .Mounts}}{{.Name}} {{end}}"])
            .arg(format!("ah-{id}"));
        let mounts = String::from_utf8_lossy(&inspect.output().unwrap().stdout).into_owned();
        base = mounts
            .split_whitespace()
            .find(|name| name.starts_with("ah-base-"))
            .unwrap_or_default()
            .to_string();
        !base.is_empty()
    });
    let removed = r
        .engine
        .podman()
        .args(["volume", "rm", &base])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&removed.stderr);
    assert!(
        !removed.status.success() && said.contains("being used"),
        "{said}"
    );
    // runuser passes no signal on: Ctrl+C reaches ah itself.
    assert!(crate::support::send_signal(
        ah_under(ah.id()),
        rustix::process::Signal::INT
    ));
    let out = ah.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", describe(&out));
    no_container_left_by(&id, |id| r.engine.containers_of(id));

    let mock = sleeper();
    let mut ah = start(&mock);
    let killed = running(&mock);
    assert!(crate::support::send_signal(
        ah_under(ah.id()),
        rustix::process::Signal::KILL
    ));
    ah.wait().unwrap();
    // The kill left the container; another test's run on the engine may
    // sweep it first, else this next run does.
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("nothing"))]);
    let out = r.ah(&mock, &["--review", "never", "next"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    no_container_left_by(&killed, |id| r.engine.containers_of(id));
}

/// The ah that `runuser` (process `runuser`) started.
fn ah_under(runuser: u32) -> u32 {
    let children = std::fs::read_to_string(format!("/proc/{runuser}/task/{runuser}/children"))
        .unwrap_or_default();
    children
        .split_whitespace()
        .next()
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("runuser {runuser} has no child"))
}

#[test]
fn a_command_that_kills_the_agent_stops_the_run_rather_than_lose_its_changes() {
    let Some(r) = Remote::new(&[("a.txt", "a\n")]) else {
        return;
    };
    let mock = MockServer::start(vec![
        bash("t1", "echo changed > a.txt; kill -9 $PPID"),
        bash("t2", "echo more > b.txt"),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = r.ah(&mock, &["--review", "auto", "break it"]);
    let said = describe(&out);
    assert_ne!(out.status.code(), Some(0), "{said}");
    // Found at the step's view (the run is stopped and its review
    // refused), or, where the next command came first, when the channel
    // could not be opened again: either way the run ends without them.
    assert!(
        (said.contains("cannot be known") && said.contains("refused"))
            || said.contains("could not be opened again"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(r.project.join("a.txt")).unwrap(),
        "a\n",
        "nothing reached the project"
    );
}

#[test]
fn attempts_side_by_side_on_a_new_baseline_send_it_once() {
    let unique = format!("{:?}\n", std::time::SystemTime::now());
    let Some(r) = Remote::new(&[("a.txt", "a\n"), ("unique.txt", &unique)]) else {
        return;
    };
    // A first run brings this ah's agent to the engine; then the project's
    // files change, and the attempts start from a baseline it lacks.
    let mock = MockServer::start(vec![
        bash("t0", "true"),
        Turn::reply(Reply::new().text("ok")),
    ]);
    let out = r.ah(&mock, &["--review", "never", "warm up"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    std::fs::write(r.project.join("unique.txt"), format!("{unique}again\n")).unwrap();
    let mock = MockServer::start(vec![
        bash("t1", "echo one >> a.txt"),
        bash("t2", "echo two >> a.txt"),
        Turn::reply(Reply::new().text("done")),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = r.ah(
        &mock,
        &["-N", "2", "-j", "2", "--review", "never", "add a line"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let starts: Vec<u64> = r.runs()[1..]
        .iter()
        .map(|id| r.manifest(id)["traffic"]["start"].as_u64().unwrap())
        .collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(
        starts.iter().filter(|bytes| **bytes > 0).count(),
        1,
        "one attempt sent the baseline, the other found it: {starts:?}"
    );
}

#[test]
fn two_ah_processes_on_a_new_baseline_fill_it_once() {
    let unique = format!("{:?}\n", std::time::SystemTime::now());
    let files = [("a.txt", "a\n"), ("unique.txt", unique.as_str())];
    let (Some(first), Some(second)) = (Remote::new(&files), Remote::new(&files)) else {
        return;
    };
    // A first run brings this ah's agent to the engine; then both
    // projects' files change alike, to a baseline the engine lacks.
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("ok"))]);
    let out = first.ah(&mock, &["--review", "never", "warm up"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    for r in [&first, &second] {
        std::fs::write(r.project.join("unique.txt"), format!("{unique}again\n")).unwrap();
    }
    let started: Vec<_> = [&first, &second]
        .into_iter()
        .map(|r| {
            let mock = MockServer::start(vec![
                bash("t1", "cat unique.txt"),
                Turn::reply(Reply::new().text("done")),
            ]);
            let child = r
                .command(&mock, &["--review", "never", "look"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (r, mock, child)
        })
        .collect();
    let mut starts = Vec::new();
    for (r, mock, child) in started {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(mock.requests()[1].told().contains("again"));
        let manifest = r.manifest(&r.runs().pop().unwrap());
        starts.push(manifest["traffic"]["start"].as_u64().unwrap());
    }
    assert_eq!(
        starts.iter().filter(|bytes| **bytes > 0).count(),
        1,
        "one process sent the baseline, the other waited for it: {starts:?}"
    );
}

#[test]
fn a_volume_podman_made_without_the_label_in_place_of_a_baseline_is_replaced() {
    let unique = format!("{:?}\n", std::time::SystemTime::now());
    let Some(r) = Remote::new(&[("a.txt", "a\n"), ("unique.txt", &unique)]) else {
        return;
    };
    // What podman leaves when a run's container names a baseline's volume
    // another client pruned a moment before: an empty one, unlabelled.
    let tree = r
        .user
        .command(Path::new("git"), &[])
        .arg("-C")
        .arg(&r.project)
        .args(["rev-parse", "HEAD^{tree}"])
        .output()
        .unwrap();
    assert!(tree.status.success(), "{}", describe(&tree));
    let tree = String::from_utf8_lossy(&tree.stdout).trim().to_string();
    let volume = format!("ah-base-{tree}-u1000");
    let made = r
        .engine
        .podman()
        .args(["volume", "create", &volume])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", describe(&made));

    let mock = MockServer::start(vec![
        bash("t1", "cat unique.txt"),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = r.ah(&mock, &["--review", "never", "look"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let told = mock.requests()[1].told();
    assert!(told.starts_with(&unique), "the baseline was sent: {told}");
    let label = r
        .engine
        .podman()
        .args(["volume", "inspect", "--format", "{{.Labels}}", &volume])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&label.stdout).contains("ah.cache:base"),
        "{}",
        describe(&label)
    );
}
