//! The remote engine (`--engine podman-remote`) in each way it is chosen
//! and used: a rootful engine as well as a rootless one, doctor and the
//! image build there, the engine found by `CONTAINER_HOST` or named in the
//! user's own configuration, and `ah work` and `ah org` in the remote
//! sandbox. Needs root, `AH_TEST_USER` and `AH_TEST_REMOTE_USER` (CI sets
//! them); `tests/remote_engine.rs` has the replay, undo, limits and cleanup.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::host::describe;
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::org::say;
use crate::support::podman::no_container_left_by;
use crate::support::remote::{CONNECTION, ROOTFUL_CONNECTION};
use crate::support::remote_run::Remote;
use crate::support::work::{Script, sees_what_do_left};
use serde_json::json;
fn bash(id: &str, command: &str) -> Turn {
    Turn::reply(Reply::new().tool_use(id, "bash", json!({ "command": command })))
}

#[test]
fn doctor_checks_the_remote_engine_and_says_how_to_fix_a_broken_connection() {
    let Some(r) = Remote::new(&[("a.txt", "a\n")]) else {
        return;
    };
    let out = r.doctor(CONNECTION);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    for line in [
        "ok   connection: ahremote: podman 4.3",
        "ok   rootless: the remote podman runs rootless",
        "ok   image: localhost/ah-sandbox:latest present on ahremote",
        "ok   start: a confined container starts",
        "ok   watches: ",
    ] {
        assert!(said.contains(line), "{line}:\n{said}");
    }

    let out = r.doctor("nosuch");
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("FAIL connection: nosuch") && said.contains("podman system connection list"),
        "{said}"
    );
}

#[test]
fn a_rootful_engine_runs_the_sandbox_unprivileged_and_its_edits_come_back() {
    let Some(r) = Remote::rootful(&[("a.txt", "one\n"), ("gone/x.txt", "x\n")]) else {
        return;
    };
    let mock = MockServer::start(vec![
        bash(
            "t1",
            "id -u; id -g; grep CapEff /proc/self/status; cat /proc/self/uid_map; \
             touch /etc/x 2>&1 | grep -c 'Read-only'; \
             printf 'two\\0\\377\\n' >> a.txt; rm -r gone; ln -s a.txt link; \
             mkdir -p d && echo deep > d/f.sh && chmod +x d/f.sh",
        ),
        Turn::reply(Reply::new().tool_use(
            "t2",
            "write",
            json!({"path": "written.txt", "content": "from the host\n"}),
        )),
        bash("t3", "cat written.txt"),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = r.ah(&mock, &["--review", "never", "change things"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    // Root's engine, no user namespace: the sandbox is uid and gid 1000
    // of that machine, without a capability, on a read-only root.
    let told: Vec<Vec<String>> = requests[1]
        .told()
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    let words = |line: &[&str]| line.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    assert_eq!(told.first(), Some(&words(&["1000"])), "{told:?}");
    assert_eq!(told.get(1), Some(&words(&["1000"])), "{told:?}");
    assert_eq!(
        told.get(2),
        Some(&words(&["CapEff:", "0000000000000000"])),
        "{told:?}"
    );
    assert_eq!(
        told.get(3),
        Some(&words(&["0", "0", "4294967295"])),
        "{told:?}"
    );
    assert_eq!(told.get(4), Some(&words(&["1"])), "{told:?}");
    assert!(requests[3].told().contains("from the host"));

    let id = r.run_id();
    let applied = r.apply(&id);
    assert_eq!(applied.status.code(), Some(0), "{}", describe(&applied));
    let p = &r.project;
    assert_eq!(std::fs::read(p.join("a.txt")).unwrap(), b"one\ntwo\0\xff\n");
    assert!(!p.join("gone").exists());
    assert_eq!(
        std::fs::read_link(p.join("link")).unwrap(),
        Path::new("a.txt")
    );
    let script = std::fs::metadata(p.join("d/f.sh")).unwrap();
    assert_eq!(script.permissions().mode() & 0o111, 0o111);
    assert_eq!(
        std::fs::read_to_string(p.join("written.txt")).unwrap(),
        "from the host\n"
    );
    no_container_left_by(&id, |id| r.engine.rootful_containers_of(id));

    // Doctor says what the engine is and that a confined container starts.
    let out = r.doctor(ROOTFUL_CONNECTION);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    for line in [
        "ok   rootless: the remote podman runs as root: the sandbox runs as uid 1000",
        "ok   start: a confined container starts",
    ] {
        assert!(said.contains(line), "{line}:\n{said}");
    }
}

#[test]
fn a_rootful_engines_memory_cgroup_kill_is_told_though_the_host_cannot_see_it() {
    let Some(r) = Remote::rootful(&[("a.txt", "a\n")]) else {
        return;
    };
    // Three processes of 150 MiB each: each within the data limit that
    // stands in per process, together over the cgroup's 256 MiB. The
    // pipeline's status is tail's: only the cgroup's count tells.
    let mock = MockServer::start(vec![
        bash(
            "t1",
            "for i in 1 2 3; do python3 -c 'import time; b = b\"x\" * (150 * 2**20); \
             time.sleep(3)' & done; wait; echo waited | tail -1",
        ),
        bash("t2", "echo small"),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = r.ah(
        &mock,
        &["--review", "never", "--memory", "256m", "use memory"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    let told = requests[1].told();
    assert!(
        told.contains("waited") && told.contains("the kernel killed a process (out of memory)"),
        "{told}"
    );
    // A command that stays within the limit is told nothing.
    let told = requests[2].told();
    assert!(!told.contains("memory limit"), "{told}");
}

#[test]
fn image_build_loads_the_image_into_the_remote_engine_once() {
    let Some(r) = Remote::new(&[("a.txt", "a\n")]) else {
        return;
    };
    r.user.build_image();
    // A tag of its own: the other tests' image stays as it is.
    let probe = "localhost/ah-remote-probe:latest";
    let podman = |args: &[&str]| {
        r.user
            .command(Path::new("/usr/bin/podman"), &[])
            .current_dir("/")
            .args(args)
            .output()
            .unwrap()
    };
    let tagged = podman(&["tag", "localhost/ah-sandbox:latest", probe]);
    assert!(tagged.status.success(), "{}", describe(&tagged));
    let build = || {
        r.user
            .command(&r.ah, &[("NO_COLOR", "1")])
            .current_dir("/")
            .args(["image", "build", "--if-stale", "--image", probe])
            .args(["--engine", "podman-remote", "--connection", CONNECTION])
            .output()
            .unwrap()
    };
    let first = build();
    let second = build();
    let _ = podman(&["rmi", probe]);
    let there = r
        .engine
        .podman()
        .args(["image", "exists", probe])
        .status()
        .unwrap();
    let _ = r.engine.podman().args(["rmi", probe]).output();
    assert_eq!(first.status.code(), Some(0), "{}", describe(&first));
    assert!(
        String::from_utf8_lossy(&first.stderr).contains("on ahremote: loaded"),
        "{}",
        describe(&first)
    );
    assert!(there.success(), "the engine has it");
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("on ahremote: is there already"),
        "{}",
        describe(&second)
    );
}

#[test]
fn the_engine_is_found_by_container_host_or_named_in_the_users_own_configuration() {
    let Some(r) = Remote::new(&[("a.txt", "a\n")]) else {
        return;
    };
    let url = r.engine.url();
    let key = r.engine.identity().display().to_string();
    let config_home = r.project.parent().unwrap().join("config");
    std::fs::create_dir_all(config_home.join("ah")).unwrap();
    std::fs::write(
        config_home.join("ah/config.toml"),
        format!("[sandbox]\nengine = \"podman-remote\"\nconnection = \"{CONNECTION}\"\n"),
    )
    .unwrap();
    // podman keeps its connections under the same folder.
    std::os::unix::fs::symlink(
        r.user.home.join(".config/containers"),
        config_home.join("containers"),
    )
    .unwrap();
    r.user.chown(&config_home);
    let config_home = config_home.display().to_string();
    // Each way: the command line's words, and the environment.
    type Way<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
    let ways: [Way; 2] = [
        // No connection named: podman's client takes CONTAINER_HOST.
        (
            &["--engine", "podman-remote"],
            &[("CONTAINER_HOST", &url), ("CONTAINER_SSHKEY", &key)],
        ),
        // Nothing on the command line: the user's own configuration.
        (&[], &[("XDG_CONFIG_HOME", &config_home)]),
    ];
    for (args, env) in ways {
        let mock = MockServer::start(vec![
            bash("t1", "tr '\\0' ' ' < /proc/1/cmdline"),
            Turn::reply(Reply::new().text("done")),
        ]);
        let url = mock.url();
        let mut all_env = vec![
            ("ANTHROPIC_BASE_URL", url.as_str()),
            ("ANTHROPIC_API_KEY", "test-key"),
            ("NO_COLOR", "1"),
        ];
        all_env.extend_from_slice(env);
        let out = r
            .user
            .command(&r.ah, &all_env)
            .args(args)
            .arg("-C")
            .arg(&r.project)
            .args(["--review", "never", "look"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{env:?}: {}", describe(&out));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("(podman-remote backend"), "{env:?}: {said}");
        // PID 1 is the init from the engine's volume.
        let told = mock.requests()[1].told();
        assert!(told.starts_with("/run/ah/init -P"), "{env:?}: {told}");
        let id = r.runs().pop().unwrap();
        no_container_left_by(&id, |id| r.engine.containers_of(id));
    }
}

#[test]
fn ah_work_runs_every_phase_in_the_remote_sandbox_and_undoes_plan_and_check() {
    let Some(r) = Remote::new(&[("a.txt", "one\n")]) else {
        return;
    };
    let script = Script::new()
        .bash("touch a.txt new.txt; echo status=$?")
        .report("## Validation\n```\ntest -f made.txt\n```\n")
        .end("planned")
        .bash("echo made > made.txt && echo two >> a.txt")
        .report("made made.txt")
        .end("done")
        .bash("rm made.txt && echo three >> a.txt")
        .bash("test -f made.txt && echo STILL-THERE; cat a.txt; ls")
        .report("test -f made.txt: pass")
        .end("checked")
        .verdict("done", "made.txt exists")
        .end("verdict given");
    let mock = MockServer::start(script.turns());
    let out = r.ah(
        &mock,
        &["work", "--review", "auto", "--issue", "make made.txt"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    let undone = requests[1].told();
    assert!(
        undone.contains("status=0") && undone.contains("step undone"),
        "plan's change undone: {undone}"
    );
    assert!(requests[7].told().contains("step undone"), "check's change");
    // The undo reached the remote sandbox: the next command sees do's /work.
    sees_what_do_left(&requests[8].told());
    let p = &r.project;
    assert_eq!(
        std::fs::read_to_string(p.join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("made.txt")).unwrap(),
        "made\n"
    );
    assert!(!p.join("new.txt").exists());
    no_container_left_by(&r.run_id(), |id| r.engine.containers_of(id));
}

#[test]
fn an_orgs_agents_share_one_remote_sandbox_and_one_patch() {
    let Some(r) = Remote::new(&[("README.md", "hello\n")]) else {
        return;
    };
    let mock = MockServer::start_agents(vec![
        (
            "coder",
            vec![
                bash("t1", "echo from-coder > made.txt"),
                bash("t2", "echo nope > locked.txt"),
                say("Made it. @@tester check made.txt"),
            ],
        ),
        (
            "tester",
            vec![bash("t3", "cat made.txt; ls"), say("It says from-coder.")],
        ),
    ]);
    let out = r.ah(
        &mock,
        &[
            "org",
            "--review",
            "auto",
            "--deny",
            "locked.txt",
            "--agents",
            "coder:opus,tester:opus",
            "Make a file.",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert!(requests[2].told().contains("locked.txt"), "undone, told");
    // The tester reads the coder's file in the same remote /work, and not
    // the undone one.
    let seen = requests[4].told();
    assert!(
        seen.contains("from-coder") && !seen.contains("locked.txt"),
        "{seen}"
    );
    assert_eq!(
        std::fs::read_to_string(r.project.join("made.txt")).unwrap(),
        "from-coder\n"
    );
    assert!(!r.project.join("locked.txt").exists());
    no_container_left_by(&r.run_id(), |id| r.engine.containers_of(id));
}
